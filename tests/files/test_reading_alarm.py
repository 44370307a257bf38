"""The reading's alarm (chatforge/files/text.py, ``_alarm``) interrupts a
conversion even when its first interruption is swallowed.

Seen in CI: the alarm's signal arrived while a garbage-collector callback
ran; Python printed "Exception ignored in …" and dropped the exception, and
the conversion ran on until the hard time limit killed the process. The
alarm now fires again until the block ends.

Run in a subprocess: pytest-timeout arms the same timer in the test process,
where ``_alarm`` (rightly) sets nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent("""
    import gc, json, os, sys, time
    import django
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    django.setup()
    from chatforge.files.text import ReadingTimedOut, _alarm

    swallowed = []
    default_hook = sys.unraisablehook
    def hook(unraisable):
        if isinstance(unraisable.exc_value, ReadingTimedOut):
            swallowed.append(repr(unraisable.exc_value))
        default_hook(unraisable)
    sys.unraisablehook = hook

    def callback(phase, info):
        # The first collection's callback runs until an interruption has been
        # swallowed in it (as gc_freeze's did in CI), or 10 s at most.
        if phase == "start" and not swallowed:
            deadline = time.monotonic() + 10
            while not swallowed and time.monotonic() < deadline:
                sum(range(1000))
    gc.callbacks.append(callback)

    outcome = "not interrupted"
    try:
        with _alarm(0.05):
            deadline = time.monotonic() + 10
            rounds = 0
            while time.monotonic() < deadline:  # the conversion: now and then a collection, mostly other work
                rounds += 1
                if rounds % 20 == 1:
                    gc.collect()
                for _ in range(100_000):
                    pass
            outcome = "interrupted only as the block ended"
    except ReadingTimedOut:
        if outcome == "not interrupted":
            outcome = "interrupted during the conversion"
    print(json.dumps({"outcome": outcome, "swallowed": len(swallowed)}))
""")


def test_an_interruption_swallowed_by_a_gc_callback_is_raised_again():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Interrupted while converting (the old alarm got there only as the block
    # ended, which a conversion that never ends never reaches), after at least
    # the first interruption was swallowed.
    assert result["outcome"] == "interrupted during the conversion", (result, done.stderr[-2000:])
    assert result["swallowed"] >= 1, result
    assert "ReadingTimedOut" in done.stderr  # Python's "Exception ignored" report of the swallowed one
