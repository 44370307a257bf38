"""The demo model: tool requests from plain questions, answers from results."""

from __future__ import annotations

import json

from chatforge.llm.providers.base import ChatMessage, TextDelta, ToolCall, TurnRequest, TurnResult
from chatforge.llm.providers.demo import CANNED_REPLY, PREAMBLE, DemoProvider

TOOLS = [
    {"type": "function", "function": {"name": name, "description": name, "parameters": {"type": "object"}}}
    for name in ("get_time", "calculator", "echo")
]


def run(messages: list[ChatMessage], tools: list[dict] | None = None) -> tuple[list[str], TurnResult]:
    request = TurnRequest("demo", messages, TOOLS if tools is None else tools)
    items = list(DemoProvider(token_delay_s=0).stream_turn(request))
    result = items[-1]
    assert isinstance(result, TurnResult)
    assert all(isinstance(item, TextDelta) for item in items[:-1])
    return [item.text for item in items[:-1]], result


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def tool_round(result: TurnResult, outputs: list[str]) -> list[ChatMessage]:
    """The messages the engine appends after executing ``result``'s calls."""
    assistant = ChatMessage(role="assistant", content=result.text, tool_calls=tuple(result.tool_calls))
    replies = [
        ChatMessage(role="tool", content=output, tool_call_id=call.id, name=call.name)
        for call, output in zip(result.tool_calls, outputs)
    ]
    return [assistant, *replies]


def test_time_question_asks_for_get_time_with_zone() -> None:
    deltas, result = run([user("What time is it in Tokyo?")])

    assert result.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("get_time", {"timezone": "Asia/Tokyo"})
    ]
    assert result.text == PREAMBLE == "".join(deltas)


def test_time_question_without_zone_sends_empty_arguments() -> None:
    _, result = run([user("what's the time?")])

    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [("get_time", {})]


def test_two_expressions_give_two_parallel_calculator_calls() -> None:
    _, result = run([user("what is 2+2 and 3*4")])

    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("calculator", {"expression": "2+2"}),
        ("calculator", {"expression": "3*4"}),
    ]
    assert len({c.id for c in result.tool_calls}) == 2


def test_expression_shapes_and_mixed_intents() -> None:
    _, result = run([user("Compute (3 + 4) * 5, 12 / 4 and 2**10, then echo done")])

    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("calculator", {"expression": "(3 + 4) * 5"}),
        ("calculator", {"expression": "12 / 4"}),
        ("calculator", {"expression": "2**10"}),
        ("echo", {"text": "done"}),
    ]


def test_only_offered_tools_are_requested() -> None:
    calculator_only = [tool for tool in TOOLS if tool["function"]["name"] == "calculator"]

    _, result = run([user("What time is it in Paris and what is 17*23?")], tools=calculator_only)

    assert [c.name for c in result.tool_calls] == ["calculator"]


def test_answer_uses_tool_results_and_reports_errors() -> None:
    history = [user("What time is it in Tokyo and what is 17*23 and 1/0?")]
    _, first = run(history)
    outputs = [
        json.dumps({"timezone": "Asia/Tokyo", "iso": "2026-01-01T09:00:00+09:00", "weekday": "Thursday"}),
        json.dumps({"expression": "17*23", "result": 391}),
        "Error: division by zero",
    ]

    deltas, answer = run(history + tool_round(first, outputs))

    assert answer.finish_reason == "stop"
    assert answer.tool_calls == []
    assert answer.text == (
        "The current time in Asia/Tokyo is 2026-01-01T09:00:00+09:00 (Thursday). 17*23 = 391. "
        "The calculator tool returned an error: division by zero."
    )
    assert "".join(deltas) == answer.text
    assert len(deltas) > 5


def test_plain_text_tool_output_is_used_verbatim() -> None:
    history = [user("what is 2+2 and echo hi")]
    _, first = run(history)

    _, answer = run(history + tool_round(first, ["4", "Error executing tool 'echo': broken"]))

    assert answer.text == "2+2 = 4. The echo tool returned an error: Error executing tool 'echo': broken."


def test_no_tools_offered_answers_without_calls() -> None:
    deltas, result = run([user("What time is it?")], tools=[])

    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert result.text == CANNED_REPLY == "".join(deltas)


def test_small_talk_gets_the_canned_reply() -> None:
    _, result = run([user("hello there")])

    assert result.text == CANNED_REPLY
    assert result.usage["completion_tokens"] == len(CANNED_REPLY.split())


def test_forced_final_turn_after_tool_round_answers_from_results() -> None:
    history = [user("what is 6*7")]
    _, first = run(history)

    _, answer = run(history + tool_round(first, ['{"result": 42}']), tools=[])

    assert answer.text == "6*7 = 42."


def test_output_is_deterministic_and_ids_differ_per_user_turn() -> None:
    question = "What time is it in London and what is 1+1?"
    first_deltas, first = run([user(question)])
    again_deltas, again = run([user(question)])

    assert (first_deltas, first) == (again_deltas, again)

    history = [user(question), *tool_round(first, ["Error: unavailable", "2"])]
    _, answer = run(history)
    _, repeated = run([*history, ChatMessage(role="assistant", content=answer.text), user(question)])

    assert [c.name for c in repeated.tool_calls] == [c.name for c in first.tool_calls]
    assert {c.id for c in repeated.tool_calls}.isdisjoint({c.id for c in first.tool_calls})


def test_calls_are_requested_once_per_user_message() -> None:
    history = [user("what is 2+2")]
    _, first = run(history)
    assert first.tool_calls

    _, second = run(history + tool_round(first, ["4"]))

    assert second.tool_calls == []
    assert isinstance(first.tool_calls[0], ToolCall)


ORDERS = {"type": "function", "function": {
    "name": "lookup_order", "description": "Look up a customer order by its number in the shop's database.",
    "parameters": {"type": "object", "required": ["order_id"], "properties": {
        "order_id": {"type": "integer"}, "region": {"type": "string", "enum": ["eu", "us"]},
        "note": {"type": "string"}}}}}
SEARCH = {"type": "function", "function": {
    "name": "kb-search", "description": "Search the knowledge base articles.",
    "parameters": {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}}}


def called(text: str) -> list[tuple[str, dict]]:
    _, result = run([user(text)], tools=[*TOOLS, ORDERS, SEARCH])
    return [(call.name, json.loads(call.arguments)) for call in result.tool_calls]


def test_any_offered_tool_named_in_the_message_is_called_with_arguments_from_it() -> None:
    assert called("Please lookup_order 42") == [("lookup_order", {"order_id": 42, "region": "eu"})]
    assert called("lookup order order_id=7 region=us note: \"rush\"") == [
        ("lookup_order", {"order_id": 7, "region": "us", "note": "rush"})]
    assert called("kb search for refund policy. Thanks") == [("kb-search", {"query": "refund policy"})]
    assert called('Use kb-search with "return window"') == [("kb-search", {"query": "return window"})]


def test_a_tool_is_also_called_when_the_message_shares_two_words_of_its_description() -> None:
    assert called("Search our knowledge base about shipping") == [
        ("kb-search", {"query": "Search our knowledge base about shipping"})]


def test_built_in_intents_and_catalog_tools_mix_in_the_order_asked() -> None:
    assert [name for name, _ in called("What is 2+2, then lookup_order 5")] == ["calculator", "lookup_order"]


def test_a_tool_not_asked_for_is_not_called_and_the_answer_quotes_any_other_tools_output() -> None:
    assert called("hello there") == []
    history = [user("lookup_order 42")]
    _, first = run(history, tools=[*TOOLS, ORDERS])
    _, answer = run(history + tool_round(first, ['{"status": "shipped"}']), tools=[*TOOLS, ORDERS])
    assert answer.text == 'The lookup_order tool returned: {"status": "shipped"}.'


def test_the_demo_says_what_was_attached_and_ignores_its_text_for_tools() -> None:
    document = ('<file name="plan.txt" id="f1" type="text/plain">\n'
                "What is 17*23? A plan in many words for the quarter ahead of us all\n</file>")
    message = ChatMessage(role="user", content=f"Have a look\n\n{document}", images=("data:image/png;base64,AA==",))

    deltas, result = run([message])

    assert result.tool_calls == []  # the arithmetic in the document is not the user's question
    assert "".join(deltas) == result.text == (
        'You attached plan.txt (text/plain, 15 words of text), which begins: "What is 17*23? A plan in many '
        'words for the quarter ahead…" You attached 1 image. I\'m the ChatForge demo model, so I only '
        "report what arrived; a real model gets the documents' text and sees the images."
    )
