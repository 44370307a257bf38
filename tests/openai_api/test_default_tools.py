"""Which tools a /v1 chat completion gets when it names none: the operator's
CHATFORGE_OPENAI_DEFAULT_TOOLS, else every enabled tool. An empty 'tools'
(what litellm sends for tools given by name) reads as none named, and so
does a 'tools' of the client's own specs only (what Open WebUI sends on
every chat): the server's defaults are offered beside them."""

from __future__ import annotations

import pytest

from chatforge.api.openai_errors import OpenAIError
from chatforge.catalog.catalog import get_catalog
from chatforge.openai_api.services import chat_start
from chatforge.openai_api.translate import parse_chat_request

pytestmark = pytest.mark.django_db


def start(make_user, **fields):
    user, _ = make_user()
    body = {"model": "demo", "messages": [{"role": "user", "content": "hi"}], **fields}
    return chat_start(user=user, request=parse_chat_request(body))


@pytest.mark.parametrize("fields", [{}, {"tools": []}])
def test_without_named_tools_every_enabled_tool_is_offered(make_user, idle_broker, settings, fields):
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = None
    assert start(make_user, **fields).options["tools"] == get_catalog().names()


@pytest.mark.parametrize("fields", [{}, {"tools": []}])
def test_the_operator_chooses_the_default_tools(make_user, idle_broker, settings, fields):
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = ["calculator"]
    assert start(make_user, **fields).options["tools"] == ["calculator"]
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = []
    run = start(make_user, **fields)
    assert run.options["tools"] == [] and run.options["max_iterations"] == 0


def test_named_tools_and_tool_choice_none_still_decide(make_user, idle_broker, settings):
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = ["calculator"]
    assert start(make_user, tools=["echo"]).options["tools"] == ["echo"]
    assert start(make_user, tool_choice="none").options["tools"] == []


def client_spec(name: str, **properties: dict) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": f"The client's {name}.",
        "parameters": {"type": "object", "properties": properties or {"query": {"type": "string"}}}}}


# Shaped like what Open WebUI 0.12 sends with its defaults: some 36 of its
# built-in tools as function specs, none of them a ChatForge tool's name.
FRONTEND_TOOLS = [client_spec(name) for name in (
    "search_web", "fetch_url", "get_current_timestamp", "calculate_timestamp", "search_notes", "view_note",
    "write_note", "search_chats", "view_chat", "search_memories", "add_memory", "replace_memory_content",
    "query_knowledge_files", "view_knowledge_file", "generate_image", "edit_image", "execute_code",
)] + [client_spec(f"builtin_tool_{i}") for i in range(19)]


def test_client_specs_alone_get_the_servers_default_tools_beside_them(make_user, idle_broker, settings):
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = None
    run = start(make_user, tools=FRONTEND_TOOLS)
    assert run.options["tools"] == get_catalog().names()
    assert [spec["function"]["name"] for spec in run.options["client_tools"]] == \
        [spec["function"]["name"] for spec in FRONTEND_TOOLS]
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = ["calculator"]
    assert start(make_user, tools=FRONTEND_TOOLS).options["tools"] == ["calculator"]
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = []
    run = start(make_user, tools=FRONTEND_TOOLS)
    assert run.options["tools"] == [] and len(run.options["client_tools"]) == len(FRONTEND_TOOLS)
    assert run.options["max_iterations"] > 0  # the client's tools are still offered


def test_a_client_spec_alone_with_a_server_tools_name_shadows_that_default(make_user, idle_broker, settings):
    """The client's own 'calculator' (other parameters) is offered, the
    server's is left out of this request; the other defaults stay."""
    theirs = client_spec("calculator", a={"type": "number"}, b={"type": "number"})
    for defaults in (None, ["calculator", "echo"]):
        settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = defaults
        run = start(make_user, tools=[theirs, *FRONTEND_TOOLS[:3]])
        assert "calculator" not in run.options["tools"] and "echo" in run.options["tools"]
        assert run.options["client_tools"][0] == theirs


def test_a_client_spec_conflicting_with_a_named_server_tool_is_refused(make_user, idle_broker):
    theirs = client_spec("calculator", a={"type": "number"})
    with pytest.raises(OpenAIError) as caught:
        start(make_user, tools=["echo", theirs])
    assert caught.value.code == "tool_name_conflict" and "Rename your tool" in caught.value.message


def test_a_client_spec_that_is_the_server_tool_names_it(make_user, idle_broker, settings):
    """A spec with the server tool's name and parameters means the server's
    tool: the request names its server tools, so the defaults do not apply."""
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = None
    calculator = get_catalog().get("calculator")
    same = {"type": "function", "function": {"name": "calculator", "parameters": calculator.parameters}}
    run = start(make_user, tools=[same, *FRONTEND_TOOLS[:2]])
    assert run.options["tools"] == ["calculator"] and len(run.options["client_tools"]) == 2
