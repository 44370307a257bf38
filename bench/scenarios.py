"""The scripted conversations the benchmark runs, and the same conversation
as a plain in-process loop (the baseline: provider + tools, no Celery, no
database, no events).

Every tool call sleeps as long as asked (``tests/support/tools.py``):
``wait_io`` on the I/O pool (the tools_io worker's threads, decision 0025)
or ``slow_sleep`` on the prefork pool, as ``--tool-pool`` chooses. In the
scenarios compared end to end the calls sleep ``TOOL_MS`` = 0 ms, so
whatever a run takes beyond the model's time is the engine's; the model
(the fake OpenAI server) answers each turn ``LLM_LATENCY_S`` after the
request arrives. Identical calls in one run would trip the engine's
repeated-call check (``CHATFORGE_TOOL_REPEAT_LIMIT``), which the benchmark
raises so that every call runs (the check itself still runs).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from chatforge.llm.providers.base import ChatMessage, TurnRequest, TurnResult
from chatforge.llm.providers.openai_compat import OpenAICompatibleProvider
from orchestration.transcript.rounds import expand_rounds
from tests.fakes.openai_server import Reply
from tools.executor import execute_tool
from tools.registry import ToolRegistry

LLM_LATENCY_S = 0.2
TOOL_MS = 0
PARALLEL_TOOL_MS = 200
PARALLEL_CALLS = 5


# The tool of each pool: the same handler, routed by its policy.
SLEEP_TOOLS = {"io": "wait_io", "process": "slow_sleep"}


def sleep_call(ms: int, pool: str) -> tuple[str, dict]:
    return (SLEEP_TOOLS[pool], {"ms": ms})


@dataclass(frozen=True)
class Scenario:
    name: str  # also the fake model's name
    label: str
    rounds: int  # tool rounds
    calls: int  # tool calls per round
    replies: tuple[Reply, ...]

    @property
    def turns(self) -> int:
        return self.rounds + 1

    @property
    def steps(self) -> int:
        """Ledger rows: model turns and tool calls."""
        return self.turns + self.rounds * self.calls


def tool_rounds(rounds: int, calls: int = 1, *, pool: str, tool_ms: int = TOOL_MS,
                latency_s: float = LLM_LATENCY_S, name: str | None = None) -> Scenario:
    """``rounds`` tool rounds of ``calls`` parallel calls each, then an answer."""
    replies = [Reply(text="Working." if i == 0 else "", tool_calls=[sleep_call(tool_ms, pool)] * calls,
                     delay_s=latency_s) for i in range(rounds)]
    replies.append(Reply(text=f"Done after {rounds} tool rounds.", delay_s=latency_s))
    if rounds == 0:
        label = "0 tool rounds"
    elif calls == 1:
        label = f"{rounds} tool round{'s' if rounds > 1 else ''}, 1 call each"
    else:
        label = f"1 round of {calls} parallel calls" if rounds == 1 else f"{rounds} rounds of {calls} calls"
    return Scenario(name=name or f"bench-r{rounds}x{calls}", label=label, rounds=rounds, calls=calls,
                    replies=tuple(replies))


def end_to_end_scenarios(pool: str) -> list[Scenario]:
    """0, 1, 2, 3 rounds of one call; one round of 2, 3, 4, 5 parallel calls."""
    return ([tool_rounds(k, pool=pool) for k in range(4)]
            + [tool_rounds(1, n, pool=pool) for n in range(2, PARALLEL_CALLS + 1)])


def parallel_round(pool: str) -> Scenario:
    """One round of 5 parallel calls of 200 ms (the parallel-round figure)."""
    return tool_rounds(1, PARALLEL_CALLS, pool=pool, tool_ms=PARALLEL_TOOL_MS, name="bench-parallel-200ms")


def instant(rounds: int, pool: str) -> Scenario:
    """Saturation: the model answers at once, tools take 0 ms."""
    return tool_rounds(rounds, pool=pool, latency_s=0.0, name=f"bench-instant-r{rounds}")


def run_in_process(provider: OpenAICompatibleProvider, registry: ToolRegistry, model: str, content: str) -> float:
    """The baseline loop: seconds from start to final answer."""
    started = time.perf_counter()
    messages = [ChatMessage(role="user", content=content)]
    specs = registry.specs()
    with ThreadPoolExecutor(max_workers=8) as pool:
        while True:
            result = next(item for item in provider.stream_turn(TurnRequest(model=model, messages=messages, tools=specs))
                          if isinstance(item, TurnResult))
            if not result.tool_calls:
                return time.perf_counter() - started
            outputs = list(pool.map(lambda c: execute_tool(registry, c.name, c.arguments), result.tool_calls))
            messages.extend(expand_rounds([{
                "assistant_response": result.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls],
                "results": [{"tool_call_id": c.id, "name": c.name, "output": o.output_text()}
                            for c, o in zip(result.tool_calls, outputs)],
            }]))


__all__ = ["Scenario", "end_to_end_scenarios", "instant", "parallel_round", "run_in_process", "tool_rounds"]
