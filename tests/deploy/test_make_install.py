"""``make run`` installs the runtime packages only (requirements.txt), and
``make test`` the test set on top of it in the same venv: the Makefile's
install rules run with a stand-in Python that records each pip call, in a
directory holding the Makefile and the requirement files."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.stack import ROOT

FILES = ("Makefile", "requirements.txt", "requirements-dev.txt", "constraints.txt")
# What installs what: the processes of ChatForge need the runtime only.
RUNTIME_TARGETS = ("run", "chat", "worker-llm", "worker-tools", "worker-tools-io", "beat")
DEV_TARGETS = ("test", "screenshots", "bench", "bench-load", "bench-relay")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    for name in FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/../pip-calls"\n')
    python.chmod(0o755)
    return tmp_path


def make(checkout: Path, target: str) -> list[str]:
    """The pip calls ``make <target>`` made (only its install prerequisite is run)."""
    calls = checkout / ".venv" / "pip-calls"
    calls.unlink(missing_ok=True)
    subprocess.run(["make", "-s", target], cwd=checkout, check=True, capture_output=True, text=True, timeout=60)
    return calls.read_text().splitlines() if calls.exists() else []


def requirement_files(calls: list[str]) -> list[str]:
    return [re.search(r"-r (\S+)", call)[1] for call in calls]


def test_a_fresh_runtime_install_leaves_out_the_test_tools(checkout):
    calls = make(checkout, "install")
    assert requirement_files(calls) == ["requirements.txt"] and "-c constraints.txt" in calls[0], calls
    assert make(checkout, "install") == []


def test_a_dev_install_stands_for_the_runtime_one(checkout):
    calls = make(checkout, "install-dev")
    assert requirement_files(calls) == ["requirements-dev.txt"] and "-c constraints.txt" in calls[0], calls
    assert make(checkout, "install") == []
    assert make(checkout, "install-dev") == []


def test_the_dev_install_follows_the_runtime_one_and_a_changed_file_installs_again(checkout):
    make(checkout, "install")
    assert requirement_files(make(checkout, "install-dev")) == ["requirements-dev.txt"]
    with (checkout / "requirements-dev.txt").open("a") as requirements:
        requirements.write("# changed\n")
    assert make(checkout, "install") == []
    assert requirement_files(make(checkout, "install-dev")) == ["requirements-dev.txt"]
    with (checkout / "requirements.txt").open("a") as requirements:
        requirements.write("# changed\n")
    assert requirement_files(make(checkout, "install")) == ["requirements.txt"]
    assert requirement_files(make(checkout, "install-dev")) == ["requirements-dev.txt"]
    stamps = sorted(path.name for path in (checkout / ".venv").glob(".installed-*"))
    assert [stamp.split("-")[1] for stamp in stamps] == ["dev", "runtime"], stamps


def test_each_target_installs_what_it_needs():
    makefile = (ROOT / "Makefile").read_text()

    def prerequisites(target: str) -> list[str]:
        return re.search(rf"^{re.escape(target)}:(.*)$", makefile, re.MULTILINE)[1].split()

    for target in RUNTIME_TARGETS:
        assert "install" in prerequisites(target), target
        assert "install-dev" not in prerequisites(target), target
    for target in DEV_TARGETS:
        assert "install-dev" in prerequisites(target), target
