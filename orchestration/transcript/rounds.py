"""Compact tool rounds built from the step ledger, and expanded back into
provider-neutral messages (docs/architecture.md, "A run, step by step").

One round = the text the model streamed before asking for tools, the calls,
and their results. The same functions serve the final assistant message
(stored compactly) and the messages of the next turn of a run in progress.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NotRequired, TypedDict

from chatforge.conversations.models import LlmTurn, Run, ToolInvocation
from chatforge.llm.providers.base import ChatMessage, ToolCall
from tools.files import ReturnedFile

INTERRUPTED_OUTPUT = "Error: this tool call did not finish because the run ended first."
# A call to a /v1 client's own tool as the run that made it stores it: the
# result is the client's, and comes with its next request (in the run that
# continues). Should such a round be shown to a model as it is, this says why
# there is no result.
CLIENT_CALL_OUTPUT = "Error: this call was for the client's own tool; the client did not send its result."


class RoundCall(TypedDict, total=False):
    id: str
    name: str
    arguments: str
    metadata: dict  # provider data replayed verbatim (e.g. Gemini thoughtSignature)


class RoundResult(TypedDict):
    tool_call_id: str
    name: str
    output: str
    status: str
    execution_time_ms: int
    # The files the call saved to the conversation (only when it saved any);
    # ``output`` already names them for the model.
    files: NotRequired[list[ReturnedFile]]
    # True when the output was served from the tool result cache (the tool
    # did not run: docs/tools.md, "Caching"); absent otherwise.
    cached: NotRequired[bool]


class ToolRound(TypedDict):
    iteration: int
    assistant_response: str
    tool_calls: list[RoundCall]
    results: list[RoundResult]


def tool_rounds_from_ledger(
    turns: Iterable[LlmTurn], invocations: Iterable[ToolInvocation]
) -> list[ToolRound]:
    """Rounds for every completed turn that asked for tools, in order. A call
    that never finished gets a result saying so, keeping the history valid
    for providers that require an answer to every call."""
    by_call = {inv.tool_call_id: inv for inv in invocations}
    rounds: list[ToolRound] = []
    for turn in sorted(turns, key=lambda t: t.iteration):
        if turn.status != "completed" or not turn.tool_calls:
            continue
        results: list[RoundResult] = []
        for call in turn.tool_calls:
            inv = by_call.get(call["id"])
            finished = inv is not None and inv.is_finished
            if inv is not None and inv.status == ToolInvocation.Status.CLIENT:
                output, status = CLIENT_CALL_OUTPUT, inv.status
            else:
                output = inv.output if finished else INTERRUPTED_OUTPUT
                status = inv.status if finished else "cancelled"
            result: RoundResult = {
                "tool_call_id": call["id"],
                "name": call["name"],
                "output": output,
                "status": status,
                "execution_time_ms": (inv.duration_ms or 0) if finished else 0,
            }
            stored = inv.result if finished and isinstance(inv.result, dict) else {}
            if stored.get("files"):
                result["files"] = stored["files"]
            if stored.get("cached") is True:
                result["cached"] = True
            results.append(result)
        rounds.append(
            {
                "iteration": turn.iteration,
                "assistant_response": turn.text,
                "tool_calls": [
                    {"id": c["id"], "name": c["name"], "arguments": c["arguments"],
                     **({"metadata": c["metadata"]} if c.get("metadata") else {})}
                    for c in turn.tool_calls
                ],
                "results": results,
            }
        )
    return rounds


def run_rounds(run: Run, turns: Iterable[LlmTurn], invocations: Iterable[ToolInvocation]) -> list[ToolRound]:
    """All of a run's rounds: those it carries on from (a /v1 client's
    answer to client tool calls: ``Run.continued_rounds``), then its own."""
    return [*run.continued_rounds, *tool_rounds_from_ledger(turns, invocations)]


def expand_rounds(rounds: Iterable[dict[str, Any]]) -> list[ChatMessage]:
    """Each round becomes an assistant message carrying its text and calls,
    then one tool message per result (adapters split further if their vendor
    wants the text separate)."""
    messages: list[ChatMessage] = []
    for rnd in rounds:
        calls = tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"], metadata=c.get("metadata") or {})
            for c in rnd["tool_calls"]
        )
        messages.append(
            ChatMessage(role="assistant", content=rnd.get("assistant_response") or None, tool_calls=calls)
        )
        for res in rnd["results"]:
            messages.append(
                ChatMessage(
                    role="tool", content=res["output"], tool_call_id=res["tool_call_id"], name=res["name"]
                )
            )
    return messages
