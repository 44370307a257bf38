"""Which tools a /v1 chat completion gets when it names none: the operator's
CHATFORGE_OPENAI_DEFAULT_TOOLS, else every enabled tool. An empty 'tools'
(what litellm sends for tools given by name) reads as none named."""

from __future__ import annotations

import pytest

from chatforge.openai_api.services import chat_start
from chatforge.openai_api.translate import parse_chat_request
from orchestration.tooling import get_registry

pytestmark = pytest.mark.django_db


def start(make_user, **fields):
    user, _ = make_user()
    body = {"model": "demo", "messages": [{"role": "user", "content": "hi"}], **fields}
    return chat_start(user=user, request=parse_chat_request(body))


@pytest.mark.parametrize("fields", [{}, {"tools": []}])
def test_without_named_tools_every_enabled_tool_is_offered(make_user, idle_broker, settings, fields):
    settings.CHATFORGE_OPENAI_DEFAULT_TOOLS = None
    assert start(make_user, **fields).options["tools"] == get_registry().names()


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
