"""Data tools, code tools, running a tool by hand, and assistants in the admin."""

from __future__ import annotations

import html
import json
import re

import pytest

from chatforge.accounts.secrets import user_secret_set
from chatforge.catalog.models import Assistant, ToolDefinition
from chatforge.catalog.tool_runs import sample_arguments
from tests.support.admin_pages import field_errors, page_text
from tests.support.site import API_KEY
from tools.net import policy

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/catalog/tooldefinition/add/"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "examples": ["Oslo"]}}, "required": ["city"]}


def tool_form(**overrides) -> dict[str, str]:
    """The add form as a browser posts it (JSON fields as text)."""
    data = {
        "name": "fake_weather", "description": "Weather, made up.", "kind": "mock", "enabled": "on",
        "parameters": json.dumps(SCHEMA), "mock_response": '{"temp_c": 12}',
        "url": "", "method": "GET", "headers": "{}", "params_mapping": "{}", "response_path": "",
        "allowed_domains": "[]", "timeout_s": "10", "max_attempts": "3", "backoff_initial_s": "0.5",
        "backoff_max_s": "8", "side_effects": "read_only", "pool": "process",
    }
    data.update(overrides)
    return data


def result_json(response) -> dict:
    """The executor result the run page shows, parsed back."""
    result_section = response.content.decode().split('id="tool-result"')[1]
    block = re.search(r'<pre class="cf-json">(.*?)</pre>', result_section, re.DOTALL)
    return json.loads(html.unescape(block.group(1)))


# --- data tools: creating, validating, switching


def test_a_valid_data_tool_is_created(admin_client):
    response = admin_client.post(ADD_URL, tool_form())
    assert response.status_code == 302, field_errors(response)
    saved = ToolDefinition.objects.get(name="fake_weather")
    assert saved.parameters == SCHEMA and saved.mock_response == {"temp_c": 12} and saved.enabled


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"parameters": '{"type": "object", "properties": {"x": {"type": "nope"}}}'}, "parameters",
         "invalid parameters schema"),
        ({"parameters": '{"type": "array"}'}, "parameters", '"type": "object"'),
        ({"parameters": "{not json"}, "parameters", "Enter a valid JSON"),
        ({"name": "calculator"}, "name", "already a built-in or code tool"),
        ({"name": "bad name!"}, "name", "Invalid tool name"),
        ({"mock_response": ""}, "mock_response", "needs the response"),
        ({"kind": "http", "url": "ftp://example.com"}, "url", "http:// or https://"),
        ({"kind": "http", "url": "https://api.example.com", "headers": '{"X-Key": 1}'}, "headers",
         "JSON object of strings"),
        ({"kind": "http", "url": "https://api.example.com", "response_path": "$[["}, "response_path",
         "Not a valid JSONPath"),
        ({"kind": "http", "url": "https://api.example.com", "allowed_domains": '"example.com"'}, "allowed_domains",
         "JSON list of domain names"),
        ({"timeout_s": "0"}, "timeout_s", "more than 0"),
        ({"backoff_initial_s": "-1"}, "backoff_initial_s", "Must not be negative"),
        ({"backoff_max_s": "-1"}, "backoff_max_s", "Must not be negative"),
        ({"kind": ""}, "kind", "This field is required"),
        # What Postgres cannot store is the field's error, not a 500 on save.
        ({"mock_response": '{"temp_c": "12\\u0000"}'}, "mock_response", "NUL character"),
        ({"parameters": '{"type": "object", "properties": {"x\\u0000": {"type": "string"}}}'}, "parameters",
         "NUL character"),
    ],
)
def test_invalid_data_tools_are_refused_with_the_error_on_the_field(admin_client, overrides, field, fragment):
    response = admin_client.post(ADD_URL, tool_form(**overrides))

    assert response.status_code == 200  # the form again, not a redirect
    errors = field_errors(response)
    assert any(fragment in message for message in errors.get(field, [])), errors
    assert "Please correct the error" in page_text(response)
    assert not ToolDefinition.objects.exists()


def test_the_schema_is_shown_indented_for_editing(admin_client):
    tool = ToolDefinition.objects.create(name="fake_weather", description="d", kind="mock", parameters=SCHEMA,
                                         mock_response=1)
    page = page_text(admin_client.get(f"/admin/catalog/tooldefinition/{tool.pk}/change/"))
    assert '{\n  "type": "object",' in page


def test_enable_and_disable_actions(admin_client):
    for name in ("tool_a", "tool_b"):
        ToolDefinition.objects.create(name=name, description="d", kind="mock", parameters={"type": "object"},
                                      mock_response=1)
    ids = list(ToolDefinition.objects.values_list("pk", flat=True))

    response = admin_client.post("/admin/catalog/tooldefinition/", {"action": "disable", "_selected_action": ids},
                                 follow=True)
    assert "Disabled 2 tool(s)" in page_text(response)
    assert not ToolDefinition.objects.filter(enabled=True).exists()

    admin_client.post("/admin/catalog/tooldefinition/", {"action": "enable", "_selected_action": ids[:1]})
    assert list(ToolDefinition.objects.filter(enabled=True).values_list("pk", flat=True)) == ids[:1]


def test_the_run_action_opens_the_run_page_for_one_tool(admin_client):
    tool = ToolDefinition.objects.create(name="fake_weather", description="d", kind="mock", parameters=SCHEMA,
                                         mock_response=1)
    other = ToolDefinition.objects.create(name="other", description="d", kind="mock", parameters=SCHEMA,
                                          mock_response=1)
    one = admin_client.post("/admin/catalog/tooldefinition/",
                            {"action": "run_with_sample_arguments", "_selected_action": [tool.pk]})
    assert one.status_code == 302 and one["Location"] == "/admin/catalog/tooldefinition/run/fake_weather/"
    two = admin_client.post("/admin/catalog/tooldefinition/",
                            {"action": "run_with_sample_arguments", "_selected_action": [tool.pk, other.pk]},
                            follow=True)
    assert "Select exactly one tool to run." in page_text(two)


# --- code tools


def test_code_tools_are_listed_read_only_with_schema_and_policy(admin_client):
    page = page_text(admin_client.get("/admin/catalog/tooldefinition/code-tools/"))
    for name in ("calculator", "echo", "get_time", "web_fetch", "search_conversations"):
        assert f'id="tool-{name}"' in page
    assert '"expression": {' in page  # calculator's schema, indented
    assert "timeout_s" in page and "side_effects" in page and "max_attempts" in page
    assert "tools.builtin.calculator" in page
    assert "/admin/catalog/tooldefinition/run/calculator/" in page
    assert "<form" not in page.split('id="content-main"')[1]  # nothing to edit


def test_a_code_tool_switched_off_says_so(admin_client, settings):
    settings.CHATFORGE_DISABLED_TOOLS = ["web_fetch"]
    page = page_text(admin_client.get("/admin/catalog/tooldefinition/code-tools/"))
    assert "Left out by CHATFORGE_DISABLED_TOOLS" in page


# --- running a tool with arguments


def test_sample_arguments_come_from_examples_defaults_and_enums():
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "examples": ["Oslo", "Rome"]},
            "days": {"type": "integer", "default": 3},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "note": {"type": "string"},
            "limit": {"type": ["integer", "null"]},
        },
        "required": ["city", "limit"],
    }
    assert sample_arguments(schema) == {"city": "Oslo", "days": 3, "unit": "c", "limit": 0}
    assert sample_arguments({"type": "object"}) == {}


def test_running_a_code_tool(admin_client):
    url = "/admin/catalog/tooldefinition/run/calculator/"
    form_page = admin_client.get(url)
    assert form_page.status_code == 200
    assert form_page.context["form"]["arguments"].value() is not None

    response = admin_client.post(url, {"arguments": '{"expression": "6*7"}'})

    result = result_json(response)
    assert result["success"] is True and result["result"]["result"] == 42 and result["tool_name"] == "calculator"
    assert isinstance(result["execution_time_ms"], int)
    assert "6*7" in page_text(response)  # the arguments stay in the form, to edit and run again


def test_running_a_mock_tool_with_the_prefilled_arguments(admin_client):
    ToolDefinition.objects.create(name="fake_weather", description="Weather.", kind="mock", parameters=SCHEMA,
                                  mock_response={"temp_c": 12}, enabled=False)
    url = "/admin/catalog/tooldefinition/run/fake_weather/"
    form_page = admin_client.get(url)
    prefilled = form_page.context["form"]["arguments"].value()
    assert json.loads(prefilled) == {"city": "Oslo"}
    assert "This data tool is disabled" in page_text(form_page)  # but it can still be tried

    result = result_json(admin_client.post(url, {"arguments": prefilled}))
    assert result == {"success": True, "result": {"temp_c": 12}, "tool_name": "fake_weather",
                      "execution_time_ms": result["execution_time_ms"]}


def test_arguments_breaking_the_schema_get_the_error_the_model_would_get(admin_client):
    ToolDefinition.objects.create(name="fake_weather", description="Weather.", kind="mock", parameters=SCHEMA,
                                  mock_response=1)
    result = result_json(admin_client.post("/admin/catalog/tooldefinition/run/fake_weather/", {"arguments": "{}"}))
    assert result["success"] is False
    assert result["error"].startswith("Error: Invalid arguments for tool 'fake_weather'")


def test_arguments_that_are_not_a_json_object_are_a_form_error(admin_client):
    response = admin_client.post("/admin/catalog/tooldefinition/run/echo/", {"arguments": "[1, 2]"})
    assert response.context["form"].errors["arguments"] == ['Tool arguments are a JSON object, e.g. {"city": "Oslo"}.']
    assert 'id="tool-result"' not in response.content.decode()
    assert admin_client.get("/admin/catalog/tooldefinition/run/no_such_tool/").status_code == 404


@pytest.fixture
def reachable_site(local_site):
    """Lets tools in this process reach the loopback test site."""
    policy.configure(allowed_private_hosts=[local_site.host_port])
    yield local_site
    policy.configure(allowed_private_hosts=[])


def test_running_an_http_tool_uses_the_admins_own_secrets(admin_client, admin_user, reachable_site):
    ToolDefinition.objects.create(
        name="city_weather", description="Current weather in a city.", kind="http", parameters=SCHEMA,
        url=f"{reachable_site.base_url}/api/weather", headers={"X-Api-Key": "${WEATHER_KEY}"},
        params_mapping={"city": "q"}, response_path="$.data[0]", max_attempts=1,
    )
    url = "/admin/catalog/tooldefinition/run/city_weather/"

    missing = result_json(admin_client.post(url, {"arguments": '{"city": "Lisbon"}'}))
    assert missing["success"] is False and "${WEATHER_KEY}" in missing["error"]

    user_secret_set(user=admin_user, name="weather_key", value=API_KEY)
    response = admin_client.post(url, {"arguments": '{"city": "Lisbon"}'})

    assert result_json(response)["result"] == {"city": "Lisbon", "temp_c": 21, "sky": "clear"}
    assert API_KEY not in response.content.decode()


def test_running_needs_the_change_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user(username="viewer", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_tooldefinition"))
    client.force_login(viewer)
    assert client.get("/admin/catalog/tooldefinition/code-tools/").status_code == 200
    assert client.get("/admin/catalog/tooldefinition/run/echo/").status_code == 403
    assert client.post("/admin/catalog/tooldefinition/run/echo/", {"arguments": '{"text": "x"}'}).status_code == 403


# --- assistants


def test_assistant_tools_are_chosen_from_the_catalog(admin_client):
    add = admin_client.get("/admin/catalog/assistant/add/")
    choices = dict(add.context["adminform"].form.fields["tools"].choices)
    assert {"calculator", "echo", "get_time"} <= set(choices)

    response = admin_client.post("/admin/catalog/assistant/add/", {
        "name": "mathbot", "description": "", "system_prompt": "You only do maths.", "model": "demo",
        "tools": ["calculator", "echo"], "max_iterations": "4",
    })

    assert response.status_code == 302, field_errors(response)
    assistant = Assistant.objects.get(name="mathbot")
    assert assistant.tools == ["calculator", "echo"] and assistant.max_iterations == 4


def test_assistant_approval_overrides(admin_client):
    base = {"name": "careful", "description": "", "system_prompt": "", "model": "", "max_iterations": "",
            "tools": ["calculator", "echo"]}
    saved = admin_client.post("/admin/catalog/assistant/add/", {
        **base, "approval_required_tools": ["echo"], "approval_waived_tools": ["calculator"]})
    assert saved.status_code == 302, field_errors(saved)
    assistant = Assistant.objects.get(name="careful")
    assert (assistant.approval_required_tools, assistant.approval_waived_tools) == (["echo"], ["calculator"])

    both = admin_client.post("/admin/catalog/assistant/add/", {
        **base, "name": "confused", "approval_required_tools": ["echo"], "approval_waived_tools": ["echo"]})
    assert "cannot both require approval and be exempt" in field_errors(both)["approval_waived_tools"][0]


def test_assistant_checks(admin_client, settings):
    base = {"name": "mathbot", "description": "", "system_prompt": "", "model": "", "max_iterations": ""}
    unknown = admin_client.post("/admin/catalog/assistant/add/", {**base, "tools": ["no_such_tool"]})
    assert "Select a valid choice" in field_errors(unknown)["tools"][0]

    too_many = admin_client.post("/admin/catalog/assistant/add/", {**base, "tools": [], "max_iterations": "500"})
    assert "less than or equal to 50" in field_errors(too_many)["max_iterations"][0]

    # A stored tool that left the catalog stays listed, marked, and the save says what is wrong.
    stale = Assistant.objects.create(name="stale", tools=["gone_tool"])
    page = admin_client.get(f"/admin/catalog/assistant/{stale.pk}/change/")
    assert ("gone_tool", "gone_tool (not in the catalog)") in page.context["adminform"].form.fields["tools"].choices
    resave = admin_client.post(f"/admin/catalog/assistant/{stale.pk}/change/", {**base, "name": "stale",
                                                                                 "tools": ["gone_tool"]})
    assert "Unknown tool(s): gone_tool" in field_errors(resave)["tools"][0]
