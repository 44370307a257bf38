"""How ``manage.py chat`` prints the events that are not text: a lost
worker's step being sent on says so on a line of its own."""

from __future__ import annotations

from chatforge.realtime.management.commands.chat import Command


def test_a_run_reconnecting_is_printed_on_a_line_of_its_own():
    text, inline = Command()._render({"type": "run.reconnecting", "seq": 9, "data": {
        "iteration": 1, "step": "llm_turn", "tool_call_id": None, "reason": "The worker … stopped answering."}})
    assert not inline
    assert text.startswith("↻ reconnecting the run…")
