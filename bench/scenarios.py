"""The scripted conversations the benchmark runs, and the same conversation
as a plain in-process loop (the baseline: provider + tools, no Celery, no
database, no events)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from orchestration.providers.base import ChatMessage, TurnRequest, TurnResult
from orchestration.providers.openai_compat import OpenAICompatibleProvider
from orchestration.rounds import expand_rounds
from tests.fakes.openai_server import Reply
from tools.executor import execute_tool
from tools.registry import ToolRegistry

LLM_LATENCY_S = 0.2
TOOL_MS = 50
PARALLEL_TOOL_MS = 200
PARALLEL_CALLS = 5


def sleep_call(ms: int) -> tuple[str, dict]:
    return ("slow_sleep", {"ms": ms})


def three_rounds() -> list[Reply]:
    """3 tool rounds with 4 calls (2 parallel, then 1, then 1), then an answer."""
    return [
        Reply(text="Working.", tool_calls=[sleep_call(TOOL_MS), sleep_call(TOOL_MS)], delay_s=LLM_LATENCY_S),
        Reply(tool_calls=[sleep_call(TOOL_MS)], delay_s=LLM_LATENCY_S),
        Reply(tool_calls=[sleep_call(TOOL_MS)], delay_s=LLM_LATENCY_S),
        Reply(text="All done after three rounds.", delay_s=LLM_LATENCY_S),
    ]


def parallel_round() -> list[Reply]:
    return [
        Reply(tool_calls=[sleep_call(PARALLEL_TOOL_MS)] * PARALLEL_CALLS, delay_s=LLM_LATENCY_S),
        Reply(text="Five naps taken.", delay_s=LLM_LATENCY_S),
    ]


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


__all__ = ["run_in_process", "three_rounds", "parallel_round"]
