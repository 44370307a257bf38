"""Tool-call assembly under the stream shapes real servers send (docs/providers.md,
"Vendor notes")."""

from __future__ import annotations

import json

from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction

from chatforge.llm.providers.base import ToolCall
from chatforge.llm.providers.tool_call_accumulator import ToolCallAccumulator


def head(index: int | None, call_id: str, name: str, arguments: str = "") -> dict:
    fragment: dict = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    if index is not None:
        fragment["index"] = index
    return fragment


def piece(index: int | None, arguments: str) -> dict:
    fragment: dict = {"function": {"arguments": arguments}}
    if index is not None:
        fragment["index"] = index
    return fragment


def accumulate(*fragments: object) -> list[ToolCall]:
    accumulator = ToolCallAccumulator()
    for fragment in fragments:
        accumulator.add(fragment)
    return accumulator.tool_calls()


def test_hostile_splits_reassemble_exactly() -> None:
    arguments = json.dumps({"city": 'Edinburgh "Old" Town', "note": "tab\there \\ done", "n": 3})
    cuts = [0, 1, 3, 4, 9, 10, 17, 18, 19, 25, 31, 32, 33, len(arguments)]
    pieces = [arguments[a:b] for a, b in zip(cuts, cuts[1:])]

    calls = accumulate(head(0, "call_a", "get_weather"), *(piece(0, p) for p in pieces))

    assert calls == [ToolCall(id="call_a", name="get_weather", arguments=arguments)]
    assert json.loads(calls[0].arguments)["city"] == 'Edinburgh "Old" Town'


def test_parallel_calls_are_keyed_by_index_and_keep_start_order() -> None:
    calls = accumulate(
        head(0, "call_a", "get_weather"),
        piece(0, '{"city": "Par'),
        head(1, "call_b", "get_time"),
        piece(1, '{"timezone": '),
        piece(0, 'is"}'),  # interleaved: a later fragment for call 0
        piece(1, '"UTC"}'),
    )

    assert calls == [
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="call_b", name="get_time", arguments='{"timezone": "UTC"}'),
    ]


def test_ollama_index_zero_with_distinct_ids_opens_new_slots() -> None:
    calls = accumulate(
        head(0, "call_1", "calculator", '{"expression": "2+2"}'),
        head(0, "call_2", "calculator", '{"expression": "3*4"}'),
        head(0, "call_3", "get_time", "{}"),
    )

    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "calculator", '{"expression": "2+2"}'),
        ("call_2", "calculator", '{"expression": "3*4"}'),
        ("call_3", "get_time", "{}"),
    ]


def test_repeated_id_and_name_are_not_doubled() -> None:
    calls = accumulate(
        head(0, "call_a", "get_time", '{"time'),
        head(0, "call_a", "get_time", 'zone": '),
        {"index": 0, "id": "call_a", "function": {"name": "get_time", "arguments": '"UTC"}'}},
    )

    assert calls == [ToolCall(id="call_a", name="get_time", arguments='{"timezone": "UTC"}')]


def test_missing_index_continues_the_last_call_or_starts_at_zero() -> None:
    calls = accumulate(
        head(None, "call_a", "echo"),
        piece(None, '{"text": '),
        piece(None, '"hi"}'),
        head(None, "call_b", "get_time", "{}"),  # a new id opens a new slot
    )

    assert calls == [
        ToolCall(id="call_a", name="echo", arguments='{"text": "hi"}'),
        ToolCall(id="call_b", name="get_time", arguments="{}"),
    ]


def test_missing_index_follows_the_most_recent_indexed_call() -> None:
    calls = accumulate(
        head(0, "call_a", "echo"), head(1, "call_b", "calculator"), piece(None, '{"expression": "1+1"}')
    )

    assert calls[1].arguments == '{"expression": "1+1"}'
    assert calls[0].arguments == "{}"


def test_empty_arguments_mean_an_empty_object() -> None:
    calls = accumulate(head(0, "call_a", "get_time", ""), piece(0, ""))

    assert calls == [ToolCall(id="call_a", name="get_time", arguments="{}")]


def test_complete_call_in_one_fragment() -> None:
    assert accumulate(head(0, "call_a", "echo", '{"text": "x"}')) == [
        ToolCall(id="call_a", name="echo", arguments='{"text": "x"}')
    ]


def test_missing_id_is_synthesised_and_unique() -> None:
    calls = accumulate(
        {"index": 0, "function": {"name": "echo", "arguments": "{}"}},
        {"index": 1, "function": {"name": "echo", "arguments": "{}"}},
    )

    assert all(call.id.startswith("call_") for call in calls)
    assert calls[0].id != calls[1].id


def test_empty_fragments_produce_no_calls() -> None:
    accumulator = ToolCallAccumulator()
    accumulator.add_all(None)
    accumulator.add_all([{"index": 0}, {"index": 0, "function": None}])

    assert not accumulator.has_calls()
    assert accumulator.tool_calls() == []


def test_sdk_objects_are_accepted() -> None:
    fragments = [
        ChoiceDeltaToolCall(
            index=0,
            id="call_a",
            type="function",
            function=ChoiceDeltaToolCallFunction(name="calculator", arguments=""),
        ),
        ChoiceDeltaToolCall(index=0, function=ChoiceDeltaToolCallFunction(arguments='{"expression": ')),
        ChoiceDeltaToolCall(index=0, function=ChoiceDeltaToolCallFunction(arguments='"2**10"}')),
    ]
    accumulator = ToolCallAccumulator()
    accumulator.add_all(fragments)

    assert accumulator.has_calls()
    assert accumulator.tool_calls() == [
        ToolCall(id="call_a", name="calculator", arguments='{"expression": "2**10"}')
    ]
