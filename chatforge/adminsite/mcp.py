"""Admin for MCP servers: register, configure, refresh, and see what they offer.

- Saving a server lists its tools at once (``discovery.discover``), so the
  page shows them, or why it could not, straight after the save.
- "Refresh tools now" (a list action, and a button on the server's page)
  does the same on demand; otherwise lists are refreshed after
  CHATFORGE_MCP_DISCOVERY_TTL_S in the background.
- The server's page lists every discovered tool: the name models see, whether
  runs are offered it (and if not, why), its policy and its input schema.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from chatforge.catalog.catalog import get_catalog
from chatforge.catalog.tool_runs import pretty_json
from chatforge.mcp.discovery import DiscoveryOutcome, discover
from chatforge.mcp.models import McpServer
from chatforge.mcp.tools import namespaced, server_of, server_tools
from tools.base import Tool

from .catalog import PrettyJSONField, switch_enabled


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "enabled", "tool_count", "discovery_state", "discovered_at"]
    list_filter = ["enabled", "transport", "requires_approval"]
    search_fields = ["name", "url"]
    actions = ["refresh_now", "enable", "disable"]
    readonly_fields = [
        "discovered_tools_table", "discovered_at", "discovery_attempted_at", "last_discovery_error",
        "created_at", "updated_at",
    ]
    formfield_overrides = {models.JSONField: {"form_class": PrettyJSONField}}
    fieldsets = [
        (None, {"fields": ["name", "url", "transport", "enabled", "headers"],
                "description": "${NAME} in a header is filled at call time from the calling user's secret "
                "“name” (lower case), else from the environment variable NAME if it starts with TOOL_. "
                "Listing the server's tools is done for no user: only environment values are filled then, "
                "and headers that need a user's secret are left out."}),
        ("Tools", {"fields": ["allowed_tools", "discovered_tools_table", "discovered_at",
                              "discovery_attempted_at", "last_discovery_error"]}),
        ("Policy", {"fields": ["timeout_s", "max_attempts", "backoff_initial_s", "backoff_max_s",
                               "side_effects", "requires_approval", "pool", "tool_overrides"],
                    "description": "Applies to every tool of the server; “tool overrides” changes it "
                                   "per tool."}),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_urls(self) -> list[URLPattern]:
        opts = self.opts
        custom = [
            path(
                "<path:object_id>/refresh/",
                self.admin_site.admin_view(self.refresh_view),
                name=f"{opts.app_label}_{opts.model_name}_refresh",
            ),
        ]
        return custom + super().get_urls()

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        if change and {"url", "transport"} & set(form.changed_data):
            # The stored list described the server that was there before: it
            # must not survive a failed listing of the new one.
            obj.discovered_tools, obj.discovered_at = [], None
        super().save_model(request, obj, form, change)
        if obj.enabled:
            self._report(request, obj, discover(obj))

    def refresh_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The "Refresh tools now" button of a server's page (POST only: it calls the server)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        server = self.get_object(request, object_id)
        if server is None:
            raise Http404("No such MCP server.")
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        self._report(request, server, discover(server))
        return HttpResponseRedirect(reverse("admin:mcp_mcpserver_change", args=[server.pk]))

    @admin.action(description="Refresh tools now (ask the selected servers for their tools)",
                  permissions=["change"])
    def refresh_now(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        for server in queryset:
            self._report(request, server, discover(server))

    @admin.action(description="Enable the selected servers", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        switch_enabled(self, request, queryset, enabled=True, noun="server")

    @admin.action(description="Disable the selected servers", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        switch_enabled(self, request, queryset, enabled=False, noun="server")

    def _report(self, request: HttpRequest, server: McpServer, outcome: DiscoveryOutcome) -> None:
        if outcome.ok:
            self.message_user(request, f"The MCP server {server.name} lists {outcome.tool_count} tool(s).",
                              messages.SUCCESS)
        else:
            kept = f" The {outcome.tool_count} tool(s) listed before are kept." if outcome.tool_count else ""
            self.message_user(request, f"Could not list the tools of the MCP server {server.name}: "
                                       f"{outcome.error}.{kept}", messages.WARNING)

    @admin.display(description="tools")
    def tool_count(self, obj: McpServer) -> str:
        built = server_tools(obj)
        return f"{len(built.offered)} of {len(obj.discovered_tools or [])}"

    @admin.display(description="discovery")
    def discovery_state(self, obj: McpServer) -> str:
        if obj.discovery_error:
            return "failed (see the server)"
        return "ok" if obj.discovered_at else "not yet"

    @admin.display(description="last discovery error")
    def last_discovery_error(self, obj: McpServer) -> str:
        return obj.discovery_error or "—"

    @admin.display(description="discovered tools")
    def discovered_tools_table(self, obj: McpServer) -> SafeString | str:
        if not obj.discovered_tools:
            return "None yet: save the server or use “Refresh tools now”."
        built = server_tools(obj)
        offered = {tool.name: tool for tool in built.offered}
        left_out = {item.name: item.reason for item in built.left_out}
        catalog = get_catalog(fresh=True)
        rows = []
        for entry in obj.discovered_tools:
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                continue
            full = namespaced(obj.name, name)
            tool = offered.get(full)
            state = left_out.get(name) or _catalog_state(obj, catalog.get(full))
            rows.append((
                full,
                "offered to runs" if not state else f"not offered: {state}",
                entry.get("description") or "",
                _policy_text(tool) if tool is not None else "",
                _hints(entry.get("annotations")),
                pretty_json(entry.get("input_schema")),
            ))
        body = format_html_join(
            "",
            '<tr><td><code class="mcp-tool-name">{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
            '<td><details><summary>schema</summary><pre class="mcp-json">{}</pre></details></td></tr>',
            rows,
        )
        return format_html(
            '<table id="mcp-discovered-tools"><thead><tr><th>name for models</th><th>state</th>'
            "<th>description</th><th>policy</th><th>server's hints</th><th>input schema</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            body,
        )


def _catalog_state(server: McpServer, in_catalog: Tool | None) -> str:
    """Why an otherwise valid tool is not in the catalog ("" when it is)."""
    if in_catalog is not None and server_of(in_catalog) == server.name:
        return ""
    if not settings.CHATFORGE_TOOLS_ENABLED:
        return "tools are turned off (CHATFORGE_TOOLS_ENABLED=false)"
    if not server.enabled:
        return "the server is disabled"
    if in_catalog is not None:
        return "another tool already has this name"
    return "left out by CHATFORGE_DISABLED_TOOLS"


def _hints(annotations: object) -> str:
    """The server's annotations (read-only, destructive...) as "name: value" text."""
    if not isinstance(annotations, dict) or not annotations:
        return "—"
    return ", ".join(f"{key}: {value}" for key, value in annotations.items())


def _policy_text(tool: Tool) -> str:
    policy = tool.policy
    return (
        f"timeout {policy.timeout_s:g} s, {policy.max_attempts} attempt(s), {policy.side_effects}"
        + (", requires approval" if policy.requires_approval else "")
    )
