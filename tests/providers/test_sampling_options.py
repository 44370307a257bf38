"""OpenAI's sampling and tool-choice parameters, as each adapter sends them
(the request builders; Gemini's wire form is in test_gemini.py): what the
provider's API has is mapped, the rest is left out."""

from __future__ import annotations

from chatforge.llm.providers import anthropic_adapter, ollama_adapter, openai_compat, openai_responses
from chatforge.llm.providers.base import ChatMessage, TurnRequest

TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Maths.",
                                           "parameters": {"type": "object", "properties": {}}}}]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
ALL = {
    "top_p": 0.5, "stop": ["END"], "seed": 3, "presence_penalty": 0.5, "frequency_penalty": -1.0,
    "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}},
    "parallel_tool_calls": False, "tool_choice": {"type": "function", "function": {"name": "calculator"}},
}


def request(options: dict, *, tools: list | None = None) -> TurnRequest:
    return TurnRequest(model="m", messages=[ChatMessage(role="user", content="hi")], tools=tools or [],
                       options=options)


def test_openai_compatible_servers_get_every_parameter_as_is():
    params = openai_compat.request_params(request(ALL, tools=TOOLS))
    assert {key: params[key] for key in ALL} == ALL
    without_tools = openai_compat.request_params(request(ALL))
    assert "tool_choice" not in without_tools and "parallel_tool_calls" not in without_tools


def test_the_responses_api_gets_its_own_shapes():
    params = openai_responses.request_params(request(ALL, tools=TOOLS))
    assert params["top_p"] == 0.5 and params["parallel_tool_calls"] is False
    assert params["tool_choice"] == {"type": "function", "name": "calculator"}
    assert params["text"]["format"] == {"type": "json_schema", "name": "answer", "schema": SCHEMA}
    assert not {"stop", "seed", "presence_penalty", "frequency_penalty"} & set(params)
    assert openai_responses.request_params(request({"response_format": {"type": "json_object"}}))["text"] == {
        "format": {"type": "json_object"}}


def test_anthropic_gets_stop_sequences_and_its_tool_choice_only():
    params = anthropic_adapter.request_params(request(ALL, tools=TOOLS))
    assert params["stop_sequences"] == ["END"]
    assert params["tool_choice"] == {"type": "tool", "name": "calculator", "disable_parallel_tool_use": True}
    assert not {"top_p", "seed", "presence_penalty", "frequency_penalty", "response_format"} & set(params)
    required = anthropic_adapter.request_params(request({"tool_choice": "required"}, tools=TOOLS))
    assert required["tool_choice"] == {"type": "any"}
    serial = anthropic_adapter.request_params(request({"parallel_tool_calls": False}, tools=TOOLS))
    assert serial["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_ollama_gets_options_and_a_format():
    body = ollama_adapter.request_body(request(ALL, tools=TOOLS))
    assert body["options"] == {"top_p": 0.5, "stop": ["END"], "seed": 3, "presence_penalty": 0.5,
                               "frequency_penalty": -1.0}
    assert body["format"] == SCHEMA
    assert ollama_adapter.request_body(request({"response_format": {"type": "json_object"}}))["format"] == "json"
    assert "tool_choice" not in body
