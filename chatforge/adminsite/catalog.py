"""Admin for the tool catalog.

- Data tools (``ToolDefinition`` rows) are edited here; every save is checked
  by ``ToolDefinition.clean`` (``definitions.check_definition``), and errors
  show next to the field they concern.
- Code tools are not rows: a read-only "Code tools" page under this model's
  admin URLs lists them with their schema and policy.
- Any tool, code or data, can be tried on a "Run with arguments" page that
  executes it with the admin's identity and secrets and shows the result.
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
from chatforge.catalog.catalog import get_catalog, unknown_tools_problem
from chatforge.catalog.code_tools import code_tools
from chatforge.catalog.models import Assistant, ToolDefinition
from chatforge.catalog.permissions import can_run_tools_by_hand
from chatforge.catalog.tool_runs import (
    code_tool_unavailable_reason,
    find_runnable_tool,
    policy_rows,
    pretty_json,
    sample_arguments,
)
from orchestration.services.tools_by_hand import run_tool_by_hand


class JSONTextarea(forms.Textarea):
    """A monospace textarea for JSON. Its look is a class in catalog/admin.css,
    never a style="" attribute, which the Content-Security-Policy blocks."""

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("catalog/admin.css",)}

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"class": "vLargeTextField cf-json-input", "rows": 8, "cols": 80, **(attrs or {})})


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
    readonly_fields = ["created_at", "updated_at"]
    formfield_overrides = {models.JSONField: {"form_class": PrettyJSONField}}
    fieldsets = [
        (None, {"fields": ["name", "description", "kind", "enabled", "parameters"]}),
        ("Mock tools", {"fields": ["mock_response"], "description": "Only for kind “Mock”: what every call returns."}),
        (
            "HTTP tools",
            {
                "fields": ["url", "method", "headers", "params_mapping", "response_path", "allowed_domains"],
                "description": "Only for kind “HTTP API”. ${NAME} in the URL or a header is filled at call time "
                "from the calling user's secret “name” (lower case), else from the environment variable "
                "NAME if it starts with TOOL_.",
            },
        ),
        (
            "Policy",
            {"fields": ["timeout_s", "max_attempts", "backoff_initial_s", "backoff_max_s", "side_effects",
                        "requires_approval", "pool"]},
        ),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

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
                "unavailable_reason": code_tool_unavailable_reason(tool.name),
                "run_url": _run_url(tool.name),
            }
            for tool in code_tools()
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Code tools",
            "tools": tools,
            "can_run": can_run_tools_by_hand(request.user),
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
        if request.method == "POST":
            form = ToolArgumentsForm(request.POST)
            if form.is_valid():
                result = run_tool_by_hand(runnable.tool, form.cleaned_data["arguments"], user_id=request.user.pk)
        else:
            form = ToolArgumentsForm(initial={"arguments": sample_arguments(runnable.tool.parameters)})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Run {runnable.tool.name}",
            "runnable": runnable,
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
