"""Every long-lived process of a deployment freezes its start-up objects
out of full garbage collections once it is ready: the web process, each
worker (gevent, threads, and the prefork parent) and each prefork child."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

LINE = "start-up objects frozen out of garbage collection"


def _frozen(text: str) -> list[dict]:
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [r for r in records if r.get("event") == LINE]


@pytest.mark.parametrize(
    ("process", "roles"),
    [
        ("server", {"web"}),
        ("llm", {"worker"}),
        ("tools-io", {"worker"}),
        ("tools", {"worker", "worker child"}),
    ],
)
def test_each_process_freezes_what_it_holds_when_ready(stack, process, roles):
    records = _frozen(stack.process(process).log())
    assert {r["role"] for r in records} == roles, stack.process(process).log()[-3000:]
    # A process's modules, classes and settings: far more than a few thousand objects.
    assert all(r["objects"] > 20_000 for r in records), records


def test_a_prefork_worker_freezes_before_it_forks_its_children(stack):
    """Frozen in the parent first, a child's collections never write to the
    pages it shares with the parent (Python's advice for forking servers)."""
    records = _frozen(stack.process("tools").log())
    assert records[0]["role"] == "worker", records
    children = [r for r in records if r["role"] == "worker child"]
    assert children
    # A child's permanent generation starts with everything its parent froze.
    assert all(child["objects"] >= records[0]["objects"] for child in children), records
