"""The admin's side of sandboxed tools and caching: script tools and their
limits through the form, the code tools' limits, the sandbox status where
operators look, and sandboxed tools refused when run by hand (admin page and
API): the web process has no sandbox.

The sandbox workers' reports are real writes to the test broker's Redis
(``chatforge.workers.sandbox_reports``); no worker runs here.
"""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from chatforge.catalog import versioning
from chatforge.catalog.catalog import forget_cached, get_catalog
from chatforge.catalog.models import CodeToolLimits, ToolDefinition
from chatforge.workers import sandbox_reports
from chatforge.workers.broker_client import broker_client
from tests.support.admin_pages import field_errors, page_text
from tools.builtin.python import PYTHON

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/catalog/tooldefinition/add/"
CODE_TOOLS_URL = "/admin/catalog/tooldefinition/code-tools/"
LIMITS_ADD_URL = "/admin/catalog/codetoollimits/add/"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
SCRIPT = "import json\nprint(json.dumps({'square': args['n'] ** 2}))\n"
LIMITS = {"sandbox_cpu_s": "5", "sandbox_memory_mb": "512", "sandbox_max_processes": "8",
          "sandbox_max_open_files": "64", "sandbox_max_file_mb": "16", "sandbox_work_mb": "64",
          "sandbox_max_output_kb": "256"}
REFUSAL = "runs only on the sandbox worker, in a conversation's run"
HOST = "sandbox@test-host:4242"


def script_form(**overrides) -> dict[str, str]:
    """The add form for a script tool, as a browser posts it."""
    data = {
        "name": "square", "description": "The square of n, computed in the sandbox.", "kind": "script",
        "enabled": "on", "parameters": json.dumps(SCHEMA), "script": SCRIPT, "mock_response": "",
        "url": "", "method": "GET", "headers": "{}", "params_mapping": "{}", "response_path": "",
        "allowed_domains": "[]", "timeout_s": "20", "max_attempts": "1", "backoff_initial_s": "0.5",
        "backoff_max_s": "8", "side_effects": "read_only", "pool": "process", "cache_ttl_s": "300",
        "cache_scope": "global", **LIMITS,
    }
    data.update(overrides)
    return data


@pytest.fixture
def sandbox_reports_cleared():
    """No sandbox worker's report before or after the test, and no offer or
    catalog read before it kept in this process."""
    client = broker_client()
    assert client is not None, "the test broker is Redis"

    def clear() -> None:
        client.delete(sandbox_reports.KEY)
        sandbox_reports.forget()
        forget_cached()

    clear()
    yield
    clear()


@pytest.fixture
def sandbox_worker_reported(sandbox_reports_cleared):
    """A sandbox worker's report that it can run sandboxes, as its worker writes it."""
    sandbox_reports.report(True, host=HOST)
    sandbox_reports.forget()
    forget_cached()


# --- script tools through the form


def test_a_valid_script_tool_is_saved_with_its_limits_and_cache(admin_client, sandbox_reports_cleared):
    response = admin_client.post(ADD_URL, script_form())

    assert response.status_code == 302, field_errors(response)
    saved = ToolDefinition.objects.get(name="square")
    assert saved.kind == "script" and saved.script.strip() == SCRIPT.strip()
    assert (saved.cache_ttl_s, saved.cache_scope) == (300.0, "global")
    assert saved.sandbox_limits().as_dict() == {name[len("sandbox_"):]: int(value) for name, value in LIMITS.items()}


def test_the_form_shows_the_script_and_sandbox_fields_with_the_models_help(admin_client, sandbox_reports_cleared):
    page = admin_client.get(ADD_URL).content.decode()

    assert 'class="vLargeTextField cf-code-input"' in page and 'name="script"' in page
    assert "Script tools" in page and "Sandbox limits" in page and "cf-kind-script" in page
    assert "CPU seconds each process of the call may use." in page  # the help text comes from the model
    assert 'name="cache_ttl_s"' in page and 'name="cache_scope"' in page
    assert "catalog/kind_fieldsets.js" in page


def test_a_mock_tool_posted_without_the_new_fields_gets_their_defaults(admin_client, sandbox_reports_cleared):
    """Forms that do not send the limits or caching fields (a mock tool's,
    written before they existed) save with the model's defaults."""
    data = {key: value for key, value in script_form(kind="mock", mock_response="1", script="").items()
            if key not in LIMITS and key not in ("cache_ttl_s", "cache_scope")}
    response = admin_client.post(ADD_URL, data)

    assert response.status_code == 302, field_errors(response)
    saved = ToolDefinition.objects.get(name="square")
    assert (saved.cache_ttl_s, saved.cache_scope, saved.sandbox_cpu_s) == (0.0, "user", 30)


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"script": "print('unclosed'\n"}, "script", "Not valid Python"),
        ({"script": "   "}, "script", "needs the Python it runs"),
        ({"side_effects": "not_idempotent"}, "cache_ttl_s", "Only read-only and idempotent tools may be cached"),
        ({"cache_ttl_s": "-1"}, "cache_ttl_s", "Must be 0 (no caching) or more seconds"),
        ({"sandbox_cpu_s": "0"}, "sandbox_cpu_s", "At least 1"),
    ],
)
def test_invalid_script_tools_are_refused_with_the_error_on_the_field(admin_client, sandbox_reports_cleared,
                                                                    overrides, field, fragment):
    response = admin_client.post(ADD_URL, script_form(**overrides))

    assert response.status_code == 200  # the form again
    errors = field_errors(response)
    assert any(fragment in message for message in errors.get(field, [])), errors
    assert "Please correct the error" in page_text(response)
    assert not ToolDefinition.objects.exists()


def test_a_script_tools_page_shows_the_sandbox_status_and_no_run_link(admin_client, sandbox_reports_cleared):
    tool = ToolDefinition.objects.create(name="square", description="d", kind="script", parameters=SCHEMA,
                                         script=SCRIPT)
    page = page_text(admin_client.get(f"/admin/catalog/tooldefinition/{tool.pk}/change/"))

    assert 'id="sandbox-status"' in page
    assert "no sandbox worker has reported in the last 90 s" in page
    assert "Run with arguments…" not in page and "not run by hand here" in page

    listed = page_text(admin_client.get("/admin/catalog/tooldefinition/"))
    assert "in a run only (sandbox)" in listed


def test_a_mock_tools_page_has_no_sandbox_status(admin_client, sandbox_reports_cleared):
    tool = ToolDefinition.objects.create(name="fixed", description="d", kind="mock", parameters=SCHEMA,
                                         mock_response=1)
    page = page_text(admin_client.get(f"/admin/catalog/tooldefinition/{tool.pk}/change/"))
    assert 'id="sandbox-status"' not in page and "Run with arguments…" in page


# --- code tools' limits


def test_the_limits_form_offers_the_sandboxed_code_tools_with_their_declared_limits(admin_client):
    response = admin_client.get(LIMITS_ADD_URL)
    form = response.context["adminform"].form

    assert [value for value, _ in form.fields["tool_name"].choices] == ["python"]  # the only sandboxed one
    declared = PYTHON.policy.sandbox.as_dict()
    assert {name: form.initial[f"sandbox_{name}"] for name in declared} == declared
    assert form.initial["tool_name"] == "python"


def test_saving_a_code_tools_limits_bumps_the_catalog_and_lists_them(admin_client):
    before = versioning.current()
    response = admin_client.post(LIMITS_ADD_URL, {"tool_name": "python", **LIMITS})

    assert response.status_code == 302, field_errors(response)
    row = CodeToolLimits.objects.get(tool_name="python")
    assert row.sandbox_cpu_s == 5 and row.sandbox_max_output_kb == 256
    assert versioning.current() > before
    listed = page_text(admin_client.get("/admin/catalog/codetoollimits/"))
    assert "python" in listed and "512" in listed


def test_the_limits_form_refuses_a_tool_that_is_not_sandboxed(admin_client):
    response = admin_client.post(LIMITS_ADD_URL, {"tool_name": "calculator", **LIMITS})
    assert response.status_code == 200
    assert "Select a valid choice" in " ".join(field_errors(response)["tool_name"])
    assert not CodeToolLimits.objects.exists()


# --- the sandbox status on the code tools page


def test_the_code_tools_page_says_why_sandboxed_tools_are_not_offered(admin_client, sandbox_reports_cleared):
    page = page_text(admin_client.get(CODE_TOOLS_URL))

    assert 'id="sandbox-status"' in page and "none has reported" in page
    assert "not offered: Sandboxed tools are not offered: no sandbox worker has reported in the last 90 s" in page
    assert '<span class="cf-sandboxed">sandboxed</span>' in page
    assert "As its code declares them" in page and "Change the limits…" in page
    assert f"{LIMITS_ADD_URL}?tool_name=python" in page


@override_settings(EMBEDDED=True, CHATFORGE_SANDBOX_ENABLED=False)
def test_in_embedded_mode_the_code_tools_page_gives_the_embedded_reason(admin_client, sandbox_reports_cleared):
    page = page_text(admin_client.get(CODE_TOOLS_URL))
    assert "sandboxed tools are not offered: embedded mode has no sandbox worker" in page


def test_the_code_tools_page_lists_the_sandbox_worker_that_reported(admin_client, sandbox_worker_reported):
    CodeToolLimits.objects.create(tool_name="python", sandbox_cpu_s=7)
    page = page_text(admin_client.get(CODE_TOOLS_URL))

    assert "yes: a sandbox worker reported that it can run sandboxes" in page
    host_row = page.split(f"<code>{HOST}</code>")[1].split("</tr>")[0]
    assert "yes" in host_row and "s ago" in host_row
    assert "not offered:" not in page.split('id="tool-python"')[1].split("</table>")[0]
    assert "Set in the admin, replacing what its code declares" in page
    assert "<th>cpu_s</th><td>7</td>" in page


def test_a_failing_sandbox_workers_reason_is_shown(admin_client, sandbox_reports_cleared):
    sandbox_reports.report(False, "bwrap: setting up uid map: Permission denied", host=HOST)
    page = page_text(admin_client.get(CODE_TOOLS_URL))

    assert "no sandbox worker can run sandboxes" in page
    assert "no: bwrap: setting up uid map: Permission denied" in page


# --- running a sandboxed tool by hand is refused


def test_the_run_page_refuses_the_python_tool(admin_client, sandbox_worker_reported):
    shown = admin_client.get("/admin/catalog/tooldefinition/run/python/")
    assert shown.status_code == 200 and REFUSAL in page_text(shown)
    assert 'value="Run" disabled' in shown.content.decode()

    posted = admin_client.post("/admin/catalog/tooldefinition/run/python/", {"arguments": '{"code": "print(1)"}'})
    assert posted.status_code == 200
    assert posted.context["result"] is None  # nothing ran
    assert REFUSAL in " ".join(posted.context["form"].non_field_errors())


def test_the_run_page_of_a_script_tool_refuses_it_and_says_why_runs_lack_it(admin_client, sandbox_reports_cleared):
    ToolDefinition.objects.create(name="square", description="d", kind="script", parameters=SCHEMA, script=SCRIPT)
    page = page_text(admin_client.get("/admin/catalog/tooldefinition/run/square/"))

    assert "'square' is a sandboxed tool" in page and REFUSAL in page
    assert "no sandbox worker has reported" in page


@pytest.mark.parametrize("reported", [False, True], ids=["not offered", "offered"])
def test_the_api_refuses_to_invoke_a_sandboxed_tool(admin_user, sandbox_reports_cleared, reported):
    if reported:
        sandbox_reports.report(True, host=HOST)
        sandbox_reports.forget()
    assert ("python" in get_catalog(fresh=True).names()) is reported
    client = APIClient()
    client.force_authenticate(admin_user)

    response = client.post("/api/tools/python/invoke/", {"arguments": {"code": "print(1)"}}, format="json")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "not_runnable_by_hand" and REFUSAL in error["message"]


def test_the_tools_api_says_which_tools_are_sandboxed_and_cached(admin_user, sandbox_worker_reported):
    ToolDefinition.objects.create(name="square", description="d", kind="script", parameters=SCHEMA, script=SCRIPT,
                                  cache_ttl_s=60)
    client = APIClient()
    client.force_authenticate(admin_user)

    listed = {tool["name"]: tool for tool in client.get("/api/tools/").json()}

    assert listed["python"]["policy"]["sandboxed"] is True and listed["python"]["policy"]["cache_ttl_s"] == 0.0
    assert listed["square"]["policy"] == {**listed["square"]["policy"], "sandboxed": True, "cache_ttl_s": 60.0}
    assert listed["calculator"]["policy"]["sandboxed"] is False
