"""Stored tool rounds (docs/architecture.md, "A run, step by step") replay
into every provider's message format: one compact round — text before the
calls, two parallel calls, one result an error, one call that never
finished — through ``expand_rounds`` and each adapter's own converter."""

from __future__ import annotations

import json

import pytest

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.llm.providers._anthropic_messages import to_anthropic
from chatforge.llm.providers._gemini_messages import to_gemini_prompt
from chatforge.llm.providers.base import ChatMessage
from chatforge.llm.providers.ollama_adapter import messages_to_ollama
from chatforge.llm.providers.openai_compat import message_to_openai
from chatforge.llm.providers.openai_responses import input_for
from orchestration.transcript.rounds import INTERRUPTED_OUTPUT, expand_rounds, tool_rounds_from_ledger

CALLS = [
    {"id": "call_a", "name": "calculator", "arguments": '{"expression": "6*7"}'},
    {"id": "call_b", "name": "web_fetch", "arguments": '{"url": "https://example.com"}'},
    {"id": "call_c", "name": "echo", "arguments": '{"text": "never ran"}'},
]


@pytest.fixture
def history() -> list[ChatMessage]:
    """The messages a follow-up turn sends, built from ledger rows as finalize stores them."""
    run = Run(id="00000000-0000-0000-0000-000000000001")
    turn = LlmTurn(run=run, iteration=0, status="completed", text="Let me check.", tool_calls=CALLS)
    done = [
        ToolInvocation(run=run, tool_call_id="call_a", name="calculator", status="success",
                       output='{"expression":"6*7","result":42}', duration_ms=1),
        ToolInvocation(run=run, tool_call_id="call_b", name="web_fetch", status="error",
                       output="Error executing tool 'web_fetch': the page answered 404 Not Found", duration_ms=5),
        ToolInvocation(run=run, tool_call_id="call_c", name="echo", status="running"),
    ]
    rounds = tool_rounds_from_ledger([turn], done)
    assert [r["status"] for r in rounds[0]["results"]] == ["success", "error", "cancelled"]
    return [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What is 6*7, and what is on example.com?"),
        *expand_rounds(json.loads(json.dumps(rounds))),  # as stored in Postgres
        ChatMessage(role="assistant", content="42; the page was not found."),
        ChatMessage(role="user", content="Thanks, and 7*8?"),
    ]


def test_openai_chat(history):
    sent = [message_to_openai(m) for m in history]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "tool", "assistant", "user"]
    assert sent[2]["content"] == "Let me check."
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_a", "call_b", "call_c"]
    assert [m["tool_call_id"] for m in sent[3:6]] == ["call_a", "call_b", "call_c"]
    assert sent[5]["content"] == INTERRUPTED_OUTPUT


def test_openai_responses(history):
    instructions, items = input_for(history)
    assert instructions == "Be brief."
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs] == ["call_a", "call_b", "call_c"]
    assert outputs[2]["output"] == INTERRUPTED_OUTPUT


def test_anthropic(history):
    conversation = to_anthropic(history)
    messages = conversation.messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assistant = messages[1]["content"]
    assert assistant[0] == {"type": "text", "text": "Let me check."}
    assert [b["id"] for b in assistant if b["type"] == "tool_use"] == ["call_a", "call_b", "call_c"]
    results = messages[2]["content"]
    assert [b["tool_use_id"] for b in results if b["type"] == "tool_result"] == ["call_a", "call_b", "call_c"]
    assert [b.get("is_error", False) for b in results if b["type"] == "tool_result"] == [False, True, True]


def test_gemini(history):
    prompt = to_gemini_prompt(history)
    assert "Be brief." in str(prompt.system_instruction)
    roles = [c["role"] for c in prompt.contents]
    assert roles == ["user", "model", "user", "model", "user"]
    calls = [p["functionCall"]["name"] for p in prompt.contents[1]["parts"] if "functionCall" in p]
    responses = [p["functionResponse"] for p in prompt.contents[2]["parts"] if "functionResponse" in p]
    assert calls == [r["name"] for r in responses] == ["calculator", "web_fetch", "echo"]
    assert responses[0]["response"] == {"expression": "6*7", "result": 42}
    assert "error" in responses[1]["response"]


def test_ollama(history):
    sent = messages_to_ollama(history)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "tool", "assistant", "user"]
    assert [c["function"]["arguments"] for c in sent[2]["tool_calls"]][0] == {"expression": "6*7"}
    assert [m["tool_name"] for m in sent[3:6]] == ["calculator", "web_fetch", "echo"]
