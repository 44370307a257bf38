"""Admin for the tool catalog.

- Data tools (``ToolDefinition`` rows) are edited here; every save is checked
  by ``ToolDefinition.clean`` (``definitions.check_definition``), and errors
  show next to the field they concern.
- Code tools are not rows: a read-only "Code tools" page under this model's
  admin URLs lists them with their schema and policy.
- Any tool, code or data, can be tried on a "Run with arguments" page that
  executes it with the admin's identity and secrets and shows the result.
- Script tools (kind "script") and sandboxed code tools run only on the
  sandbox worker: their pages say whether sandboxed tools are offered now and
  which sandbox workers reported; the admin's limits for a code tool are
  ``CodeToolLimits`` rows; neither kind is run by hand here (the web process
  has no sandbox: ``orchestration/services/tools_by_hand.py``).
- Assistants pick their tools from the catalog's names.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.core.exceptions import PermissionDenied
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from chatforge.api.json_input import InvalidJSON, check_json_value
from chatforge.catalog import versioning as catalog_versioning
from chatforge.catalog.catalog import get_catalog, sandbox_offer, unknown_tools_problem
from chatforge.catalog.code_tools import code_tools
from chatforge.catalog.models import Assistant, CodeToolLimits, ToolDefinition
from chatforge.catalog.permissions import can_run_tools_by_hand
from chatforge.catalog.tool_runs import (
    find_runnable_tool,
    offered_reason,
    policy_rows,
    pretty_json,
    sample_arguments,
)
from chatforge.workers.sandbox_reports import Offer
from orchestration.services.tools_by_hand import NotRunnableByHand, by_hand_refusal, run_tool_by_hand
from tools.base import Tool
from tools.sandbox_limits import LIMIT_HELP, SandboxLimits

# The limit fields of a sandboxed tool's row, in the order LIMIT_HELP gives.
SANDBOX_LIMIT_FIELDS = [f"sandbox_{name}" for name in LIMIT_HELP]


def label_limit_fields(form: forms.BaseForm) -> None:
    """The least value the checks take (1) as the inputs' minimum (the
    labels are the model fields' names: tools.sandbox_limits.LIMIT_LABEL)."""
    for name in SANDBOX_LIMIT_FIELDS:
        field = form.fields.get(name)
        if field is not None:
            field.widget.attrs["min"] = 1


class JSONTextarea(forms.Textarea):
    """A monospace textarea for JSON. Its look is a class in catalog/admin.css,
    never a style="" attribute, which the Content-Security-Policy blocks."""

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("catalog/admin.css",)}

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"class": "vLargeTextField cf-json-input", "rows": 8, "cols": 80, **(attrs or {})})


class CodeTextarea(forms.Textarea):
    """A monospace textarea for a script tool's Python; like JSONTextarea, its
    look is a class in catalog/admin.css (the Content-Security-Policy blocks
    style="" attributes)."""

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("catalog/admin.css",)}

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"class": "vLargeTextField cf-code-input", "rows": 16, "cols": 80,
                                "spellcheck": "false", **(attrs or {})})


class PrettyJSONField(forms.JSONField):
    """A JSON form field that shows its value indented, so schemas and mappings
    are readable and editable in a textarea."""

    widget = JSONTextarea

    def to_python(self, value: Any) -> Any:
        """Also refuse what Postgres cannot store (a NUL character, an
        unpaired surrogate) with the form's error, not a 500 on save."""
        parsed = super().to_python(value)
        try:
            check_json_value(parsed)
        except InvalidJSON as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None
        return parsed

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value  # what the person typed, to correct it
        if value is None:
            return ""  # nothing stored (e.g. a new tool's mock response), not the JSON text "null"
        return pretty_json(value)


class ToolArgumentsForm(forms.Form):
    # Not required: {} is a JSON object, but a form field counts it as empty.
    arguments = PrettyJSONField(
        required=False,
        help_text="A JSON object. It is checked against the tool's schema, as a model's call would be.",
    )

    def clean_arguments(self) -> dict[str, Any]:
        value = self.cleaned_data["arguments"]
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Tool arguments are a JSON object, e.g. {"city": "Oslo"}.')
        return value


class ToolDefinitionForm(forms.ModelForm):
    """The data tool form. The caching and sandbox fields may be left out or
    blank (a mock or HTTP tool has no use for the limits, and forms written
    before they existed do not send them): blank is the model's default, so
    a tool is never saved with a limit of nothing."""

    DEFAULTED: ClassVar[tuple[str, ...]] = ("cache_ttl_s", "cache_scope", *SANDBOX_LIMIT_FIELDS)

    class Meta:
        model = ToolDefinition
        fields = "__all__"
        widgets = {"script": CodeTextarea}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.DEFAULTED:
            field = self.fields.get(name)
            if field is not None:
                field.required = False
        label_limit_fields(self)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        for name in self.DEFAULTED:
            if name in self.fields and cleaned.get(name) in (None, ""):
                cleaned[name] = ToolDefinition._meta.get_field(name).get_default()
        return cleaned


def switch_enabled(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, *, enabled: bool,
                   noun: str) -> None:
    """The enable/disable list actions of catalog rows (data tools, MCP
    servers): one UPDATE, and a message that says when workers see it."""
    with transaction.atomic():
        changed = queryset.update(enabled=enabled)
        catalog_versioning.bump()  # an update() sends no post_save
    model_admin.message_user(
        request, f"{'Enabled' if enabled else 'Disabled'} {changed} {noun}(s); every step that starts from now "
                 "on uses the change.", messages.SUCCESS)


@admin.register(ToolDefinition)
class ToolDefinitionAdmin(admin.ModelAdmin):
    list_display = [
        "name", "kind", "enabled", "method", "url", "side_effects", "timeout_s", "max_attempts",
        "requires_approval", "updated_at", "run_link",
    ]
    list_filter = ["kind", "enabled", "side_effects", "requires_approval", "pool", "method"]
    search_fields = ["name", "description", "url"]
    list_editable = ["enabled"]
    actions = ["run_with_sample_arguments", "enable", "disable"]
    form = ToolDefinitionForm
    readonly_fields = ["created_at", "updated_at"]
    formfield_overrides = {models.JSONField: {"form_class": PrettyJSONField}}
    # Each kind's fieldset carries the class cf-kind-<kind>: catalog/kind_fieldsets.js
    # shows only the chosen kind's (without JavaScript, all of them show).
    fieldsets = [
        (None, {"fields": ["name", "description", "kind", "enabled", "parameters"]}),
        ("Mock tools", {"fields": ["mock_response"], "classes": ["cf-kind-mock"],
                        "description": "Only for kind “Mock”: what every call returns."}),
        (
            "HTTP tools",
            {
                "fields": ["url", "method", "headers", "params_mapping", "response_path", "allowed_domains"],
                "classes": ["cf-kind-http"],
                "description": "Only for kind “HTTP API”. ${NAME} in the URL or a header is filled at call time "
                "from the calling user's secret “name” (lower case), else from the environment variable "
                "NAME if it starts with TOOL_.",
            },
        ),
        (
            "Script tools",
            {
                "fields": ["script"],
                "classes": ["cf-kind-script"],
                "description": "Only for kind “Python script”. The script runs in a fresh sandbox for each "
                "call, on the sandbox worker: the call's arguments are the dict args; what it prints is the "
                "result (parsed as JSON when it prints JSON). The conversation's files are read-only in "
                "/mnt/data; files it writes to its working directory /mnt/output are returned to the "
                "user. There is no network. docs/admin.md has an example.",
            },
        ),
        (
            "Sandbox limits",
            {
                "fields": SANDBOX_LIMIT_FIELDS,
                "classes": ["cf-kind-script"],
                "description": "Only for kind “Python script”: what one call may use, enforced by the kernel. "
                "The wall time is the tool's timeout (Policy).",
            },
        ),
        (
            "Policy",
            {"fields": ["timeout_s", "max_attempts", "backoff_initial_s", "backoff_max_s", "side_effects",
                        "requires_approval", "pool", "cache_ttl_s", "cache_scope"]},
        ),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    class Media:
        js = ("catalog/kind_fieldsets.js",)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """A script tool's page says whether runs are offered it now: only
        while a sandbox worker reports that it can run sandboxes."""
        extra_context = dict(extra_context or {})
        obj = self.get_object(request, object_id)
        if obj is not None and obj.kind == ToolDefinition.Kind.SCRIPT:
            extra_context["sandbox"] = sandbox_status(sandbox_offer())
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self) -> list[URLPattern]:
        # Before the default patterns: "<path:object_id>/" would swallow these.
        opts = self.opts
        custom = [
            path(
                "code-tools/",
                self.admin_site.admin_view(self.code_tools_view),
                name=f"{opts.app_label}_{opts.model_name}_code_tools",
            ),
            path(
                "run/<str:tool_name>/",
                self.admin_site.admin_view(self.run_tool_view),
                name=f"{opts.app_label}_{opts.model_name}_run",
            ),
        ]
        return custom + super().get_urls()

    @admin.display(description="try")
    def run_link(self, obj: ToolDefinition) -> str:
        if obj.kind == ToolDefinition.Kind.SCRIPT:
            return "in a run only (sandbox)"  # the web process has no sandbox: tools_by_hand.by_hand_refusal
        return format_html('<a href="{}">Run…</a>', _run_url(obj.name))

    @admin.action(description="Run the selected tool with arguments…", permissions=["change"])
    def run_with_sample_arguments(
        self, request: HttpRequest, queryset: QuerySet[ToolDefinition]
    ) -> HttpResponse | None:
        names = list(queryset.values_list("name", flat=True)[:2])
        if len(names) != 1:
            self.message_user(request, "Select exactly one tool to run.", messages.WARNING)
            return None
        return HttpResponseRedirect(_run_url(names[0]))

    @admin.action(description="Enable the selected tools", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[ToolDefinition]) -> None:
        switch_enabled(self, request, queryset, enabled=True, noun="tool")

    @admin.action(description="Disable the selected tools", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[ToolDefinition]) -> None:
        switch_enabled(self, request, queryset, enabled=False, noun="tool")

    def code_tools_view(self, request: HttpRequest) -> TemplateResponse:
        """Code tools, read-only: they are defined in Python, not in the database."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        offer = sandbox_offer()
        admin_limits = {row.tool_name: row for row in CodeToolLimits.objects.all()}
        tools = [
            {
                "name": tool.name,
                "description": tool.description,
                "schema": pretty_json(tool.parameters),
                "policy": policy_rows(tool),
                "timeout_s": tool.policy.timeout_s,
                "max_attempts": tool.policy.max_attempts,
                "side_effects": tool.policy.side_effects,
                "module": getattr(tool.handler, "__module__", ""),
                "unavailable_reason": offered_reason(tool, offer),
                "run_url": _run_url(tool.name),
                "run_refusal": by_hand_refusal(tool),
                "sandbox": sandboxed_tool_facts(tool, admin_limits.get(tool.name)),
                "cache": f"{tool.policy.cache_ttl_s:g} s, {tool.policy.cache_scope}" if tool.policy.cached else "",
            }
            for tool in code_tools()
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Code tools",
            "tools": tools,
            "can_run": can_run_tools_by_hand(request.user),
            "sandbox": sandbox_status(offer) if any(tool["sandbox"] for tool in tools) else None,
        }
        return TemplateResponse(request, "admin/catalog/tooldefinition/code_tools.html", context)

    def run_tool_view(self, request: HttpRequest, tool_name: str) -> HttpResponse:
        """Edit arguments (prefilled from the schema), run the tool, show the executor's result.

        Running needs the change permission: an HTTP tool may have effects
        outside (POST, DELETE), so viewing tools is not enough. The API's
        invoke endpoint asks the same (``can_run_tools_by_hand``).
        """
        if not can_run_tools_by_hand(request.user):
            raise PermissionDenied
        try:
            runnable = find_runnable_tool(tool_name)
        except (ValueError, TypeError) as exc:
            self.message_user(request, f"Tool '{tool_name}' cannot be built: {exc}", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:catalog_tooldefinition_changelist"))
        if runnable is None:
            raise Http404(f"No tool named '{tool_name}'.")
        result = None
        refusal = by_hand_refusal(runnable.tool)
        if request.method == "POST":
            form = ToolArgumentsForm(request.POST)
            if form.is_valid():
                try:
                    result = run_tool_by_hand(runnable.tool, form.cleaned_data["arguments"],
                                              user_id=request.user.pk)
                except NotRunnableByHand as exc:
                    form.add_error(None, exc.message)
        else:
            form = ToolArgumentsForm(initial={"arguments": sample_arguments(runnable.tool.parameters)})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Run {runnable.tool.name}",
            "runnable": runnable,
            "unavailable_reason": runnable.unavailable_reason,
            "refusal": refusal,
            "schema": pretty_json(runnable.tool.parameters),
            "policy": policy_rows(runnable.tool),
            "form": form,
            "result": result,
            "result_json": pretty_json(result.as_dict()) if result else "",
            "model_sees": result.output_text() if result else "",
        }
        return TemplateResponse(request, "admin/catalog/tooldefinition/run_tool.html", context)


# Code tools are rows of no model, so the index's app list cannot show them:
# the index template adds a link to their page.
admin.site.index_template = "admin/catalog/index.html"


def _run_url(tool_name: str) -> str:
    return reverse("admin:catalog_tooldefinition_run", args=[tool_name])


def sandboxed_tool_facts(tool: Tool, admin_row: CodeToolLimits | None) -> dict[str, Any] | None:
    """A sandboxed code tool's limits as runs apply them (the admin's row
    replaces what the code declares: chatforge/catalog/catalog.py), where
    they come from and where to change them; None for other tools."""
    if tool.policy.sandbox is None:
        return None
    limits = admin_row.sandbox_limits() if admin_row is not None else tool.policy.sandbox
    if admin_row is not None:
        edit_url = reverse("admin:catalog_codetoollimits_change", args=[admin_row.pk])
    else:
        edit_url = reverse("admin:catalog_codetoollimits_add") + f"?tool_name={tool.name}"
    return {"limits": list(limits.as_dict().items()), "set_in_admin": admin_row is not None, "edit_url": edit_url}


def sandbox_status(offer: Offer) -> dict[str, Any]:
    """What the sandbox panel shows: whether sandboxed tools are offered now,
    why not, and every sandbox worker's last report (a report older than
    CHATFORGE_SANDBOX_REPORT_TTL_S no longer counts)."""
    ttl = settings.CHATFORGE_SANDBOX_REPORT_TTL_S
    return {
        "ok": offer.ok,
        "reason": offer.reason,
        "ttl_s": ttl,
        "report_every_s": ttl / 3,  # orchestration/services/sandbox_host.py
        "hosts": [
            {"host": host.host, "ok": host.ok, "reason": host.reason, "age_s": round(host.age_s),
             "current": host.age_s <= ttl}
            for host in offer.hosts
        ],
    }


def sandboxed_code_tools() -> list[Tool]:
    """The code tools whose calls run in the sandbox: the ones CodeToolLimits rows are for."""
    return [tool for tool in code_tools() if tool.policy.sandboxed]


def _limits_text(limits: SandboxLimits) -> str:
    return ", ".join(f"{name} {value}" for name, value in limits.as_dict().items())


class CodeToolLimitsForm(forms.ModelForm):
    """The tool is chosen among the sandboxed code tools; a stored name no
    such tool has any more stays listed (marked), so the row can be seen and
    deleted. A new row starts from the tool's declared limits."""

    tool_name = forms.ChoiceField(help_text="The sandboxed code tool these limits are for; they replace the "
                                            "limits its code declares, on every call from the next step on.")

    class Meta:
        model = CodeToolLimits
        fields = ["tool_name", *SANDBOX_LIMIT_FIELDS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tools = sandboxed_code_tools()
        choices = [(tool.name, tool.name) for tool in tools]
        stored = self.instance.tool_name if self.instance.pk else ""
        if stored and stored not in {tool.name for tool in tools}:
            choices.append((stored, f"{stored} (no sandboxed code tool has this name)"))
        self.fields["tool_name"].choices = choices
        label_limit_fields(self)
        self.fields["tool_name"].help_text += " Declared: " + "; ".join(
            f"{tool.name}: {_limits_text(tool.policy.sandbox)}" for tool in tools if tool.policy.sandbox
        ) + "." if tools else " No code tool loaded here is sandboxed."


@admin.register(CodeToolLimits)
class CodeToolLimitsAdmin(admin.ModelAdmin):
    """The admin's limits for a sandboxed code tool (``python``); saving or
    deleting one bumps the catalog's version (chatforge/catalog/apps.py), so
    every step claimed after it commits runs under the new limits."""

    form = CodeToolLimitsForm
    list_display = ["tool_name", *SANDBOX_LIMIT_FIELDS, "updated_at"]
    readonly_fields = ["updated_at"]
    fieldsets = [
        (None, {"fields": ["tool_name"]}),
        ("Limits", {"fields": SANDBOX_LIMIT_FIELDS,
                    "description": "What one call may use, enforced by the kernel. The wall time is the tool's "
                                   "timeout."}),
        ("History", {"fields": ["updated_at"], "classes": ["collapse"]}),
    ]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """The chosen tool's declared limits (``?tool_name=``, as the code tools
        page links it; else the first sandboxed tool's), so an admin changes
        one limit without retyping the others."""
        initial = super().get_changeform_initial_data(request)
        tools = {tool.name: tool for tool in sandboxed_code_tools()}
        tool = tools.get(str(initial.get("tool_name", ""))) or next(iter(tools.values()), None)
        if tool is not None and tool.policy.sandbox is not None:
            initial.setdefault("tool_name", tool.name)
            initial.update({f"sandbox_{name}": value for name, value in tool.policy.sandbox.as_dict().items()})
        return initial


class AssistantForm(forms.ModelForm):
    """Tools are chosen from the catalog's names, not typed as JSON; a stored
    name the catalog no longer has stays listed (marked) so the check on save
    can say what is wrong with it."""

    tools = forms.MultipleChoiceField(
        required=False,
        widget=FilteredSelectMultiple("tools", is_stacked=False),
        help_text="The tools this assistant's runs may use (a request naming its own tools wins). "
        "None chosen: its runs get no tools.",
    )
    max_iterations = forms.IntegerField(
        required=False,
        help_text="Model turns with tools before a forced final answer; blank: the server default.",
    )
    approval_required_tools = forms.MultipleChoiceField(
        required=False,
        widget=FilteredSelectMultiple("tools that ask first", is_stacked=False),
        help_text="Each call of these waits for the user's approval in this assistant's runs, "
        "whatever the tool's own policy says.",
    )
    approval_waived_tools = forms.MultipleChoiceField(
        required=False,
        widget=FilteredSelectMultiple("tools that never ask", is_stacked=False),
        help_text="These run without asking in this assistant's runs, even where the tool's policy "
        "requires approval.",
    )

    class Meta:
        model = Assistant
        fields = ["name", "description", "system_prompt", "model", "tools", "max_iterations",
                  "approval_required_tools", "approval_waived_tools"]
        widgets = {"system_prompt": forms.Textarea(attrs={"rows": 12, "cols": 80})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        available = get_catalog(fresh=True).names()
        self._catalog_names = set(available)  # clean_tools checks against the same catalog
        for field in ("tools", "approval_required_tools", "approval_waived_tools"):
            stored = [name for name in (getattr(self.instance, field) or []) if isinstance(name, str)]
            missing = [name for name in stored if name not in available]
            self.fields[field].choices = [(name, name) for name in available] + [
                (name, f"{name} (not in the catalog)") for name in missing
            ]
        limit = settings.CHATFORGE_MAX_ITERATIONS_LIMIT
        self.fields["max_iterations"].validators += [MinValueValidator(0), MaxValueValidator(limit)]
        self.fields["max_iterations"].help_text += f" At most {limit} (CHATFORGE_MAX_ITERATIONS_LIMIT)."

    def clean_tools(self) -> list[str]:
        tools = self.cleaned_data["tools"]
        most = settings.CHATFORGE_MAX_TOOLS_PER_REQUEST
        if len(tools) > most:
            # Every run of the assistant would be refused with a 400.
            raise forms.ValidationError(
                f"{len(tools)} tools chosen; a run may offer at most {most} (CHATFORGE_MAX_TOOLS_PER_REQUEST)."
            )
        problem = unknown_tools_problem(tools, self._catalog_names)  # a stored name the catalog no longer has
        if problem:
            raise forms.ValidationError(problem)
        return tools



@admin.register(Assistant)
class AssistantAdmin(admin.ModelAdmin):
    form = AssistantForm
    list_display = ["name", "model", "tool_list", "max_iterations", "updated_at"]
    search_fields = ["name", "description", "system_prompt", "model"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "description", "model", "max_iterations"]}),
        ("Scheduling", {"fields": ["max_running_steps"]}),
        ("Prompt", {"fields": ["system_prompt"]}),
        ("Tools", {"fields": ["tools"]}),
        ("Approval", {"fields": ["approval_required_tools", "approval_waived_tools"],
                      "description": "Overrides of each tool's own 'requires approval' policy "
                                     "for this assistant's runs."}),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    @admin.display(description="tools")
    def tool_list(self, obj: Assistant) -> str:
        return ", ".join(obj.tools or []) or "— (none)"
