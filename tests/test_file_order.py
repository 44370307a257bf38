"""The order the suite's files are handed out in (tests/support/file_order.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.file_order import durations_from_junit, longest_files_first


@dataclass
class _Item:
    nodeid: str


def test_files_longest_first_each_file_whole_and_in_its_own_order():
    items = [_Item("tests/a.py::one"), _Item("tests/b.py::one"), _Item("tests/a.py::two"),
             _Item("tests/c.py::one"), _Item("tests/b.py::two")]
    ordered = longest_files_first(items, {"tests/a.py": 1.0, "tests/b.py": 30.0, "tests/c.py": 5.0})
    assert [i.nodeid for i in ordered] == ["tests/b.py::one", "tests/b.py::two", "tests/c.py::one",
                                          "tests/a.py::one", "tests/a.py::two"]


def test_a_file_not_recorded_runs_at_the_median():
    items = [_Item(f"tests/{name}.py::t") for name in ("short", "new", "long", "mid")]
    ordered = longest_files_first(items, {"tests/short.py": 1.0, "tests/mid.py": 10.0, "tests/long.py": 100.0})
    # The median of 1, 10 and 100 is 10: the new file ties with mid and keeps its collection place.
    assert [i.nodeid for i in ordered] == ["tests/long.py::t", "tests/new.py::t", "tests/mid.py::t",
                                          "tests/short.py::t"]


def test_durations_from_a_junit_report_sum_each_files_tests(tmp_path: Path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_file_order" name="a" time="1.25"/>'
        '<testcase classname="tests.test_file_order" name="b" time="0.5"/>'
        '<testcase classname="tests.support.no_such_file" name="c" time="9"/>'
        "</testsuite></testsuites>")
    assert durations_from_junit(report) == {"tests/test_file_order.py": 1.8}
