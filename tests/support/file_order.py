"""The order test files are handed to the test processes: longest first.

``make test`` runs the files in three processes (pytest-xdist,
``--dist loadfile``), each file whole in one process. xdist hands out files
in collection order (``--no-loadscope-reorder``; by default it orders them by
their number of tests, which put the schemathesis run — a few tests, minutes
long — at the very end, alone). Handing out the longest files first is the
classic longest-processing-time rule: the run ends when the last file ends,
and with the long ones started first the short ones fill the gaps.

How long a file takes comes from ``tests/file_durations.json``, seconds per
file measured in a full run (``make test-durations`` writes it). A file not
in it yet is given the median, so a new file runs mid-pack until the next
measurement. The order only changes which process runs a file when, never
what a test does, so a stale record costs time, not correctness.
"""

from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS_FILE = Path(__file__).resolve().parents[1] / "file_durations.json"


def recorded_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Seconds per test file (path relative to the checkout), or {} when
    nothing was recorded."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return {}


def longest_files_first(items: list[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """``items`` regrouped by file, the files in falling recorded duration
    (unknown files at the median; ties in collection order), each file's
    tests in their own order."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    default = statistics.median(durations.values()) if durations else 0.0
    order = sorted(by_file, key=lambda name: -durations.get(name, default))  # sorted() is stable
    return [item for name in order for item in by_file[name]]


def durations_from_junit(report: Path) -> dict[str, float]:
    """Seconds per file from a JUnit XML report (``pytest --junitxml``),
    each test's setup, call and teardown summed."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is "tests.api.test_x" or "tests.api.test_x.TestClass".
        for cut in range(len(module), 0, -1):
            candidate = "/".join(module[:cut]) + ".py"
            if (DURATIONS_FILE.parent.parent / candidate).exists():
                seconds[candidate] += float(case.get("time") or 0)
                break
    return {name: round(value, 1) for name, value in sorted(seconds.items())}


if __name__ == "__main__":
    # python -m tests.support.file_order REPORT.xml: rewrite the record.
    measured = durations_from_junit(Path(sys.argv[1]))
    DURATIONS_FILE.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    print(f"{len(measured)} files, {sum(measured.values()):.0f} s in all, written to {DURATIONS_FILE}")
