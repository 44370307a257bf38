"""Where sandboxed tools are offered, and why not (docs/sandbox.md, "Where
it runs"): a host's probe, the sandbox workers' reports in Redis, and the
catalog that follows them. Never a silent fallback: without a sandbox the
tools are not offered, and a call that reaches a process without one never
runs its code."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from django.test import override_settings

from chatforge.catalog.catalog import forget_cached, get_catalog
from chatforge.catalog.models import CodeToolLimits
from chatforge.workers import sandbox_reports
from chatforge.workers.broker_client import broker_client
from orchestration.queueing.dispatch import TOOL_CALL_SANDBOX, tool_call_task
from orchestration.services import sandbox_host
from tests.support.sandbox import SANDBOX_PYTHON
from tools.base import ToolPolicy
from tools.sandbox.config import SandboxConfig
from tools.sandbox.probe import probe
from tools.sandbox_limits import SandboxLimits

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_reports():
    client = broker_client()
    client.delete(sandbox_reports.KEY)
    sandbox_reports.forget()
    forget_cached()
    yield
    client.delete(sandbox_reports.KEY)
    sandbox_reports.forget()
    forget_cached()


def test_a_host_without_bubblewrap_says_how_to_install_it() -> None:
    availability = probe(SandboxConfig(bwrap="/nonexistent/bwrap", python_env=SANDBOX_PYTHON))
    assert not availability.ok
    assert "apt-get install bubblewrap" in availability.reason


def test_a_host_without_the_sandbox_python_says_how_to_build_it(tmp_path) -> None:
    availability = probe(SandboxConfig(python_env=str(tmp_path / "missing")))
    assert not availability.ok
    assert "make sandbox" in availability.reason and "CHATFORGE_SANDBOX_PYTHON" in availability.reason


def test_a_kernel_that_refuses_namespaces_is_named_in_the_reason() -> None:
    # What bubblewrap prints where user namespaces are switched off; in a
    # directory the sandbox's user can reach (it starts bubblewrap).
    directory = Path(tempfile.mkdtemp(prefix="chatforge-fake-bwrap-"))
    directory.chmod(0o755)
    refusing = directory / "bwrap"
    refusing.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    refusing.chmod(0o755)
    try:
        availability = probe(SandboxConfig(bwrap=str(refusing), python_env=SANDBOX_PYTHON))
    finally:
        shutil.rmtree(directory)
    assert not availability.ok
    assert availability.reason == ("bubblewrap cannot make a sandbox on this host: "
                                   "No permissions to creating new namespace")


def test_without_a_report_sandboxed_tools_are_not_offered_and_the_reason_says_what_to_start() -> None:
    offer = sandbox_reports.offer(fresh=True)
    assert not offer.ok
    assert "no sandbox worker has reported" in offer.reason and "-Q sandbox" in offer.reason
    assert "python" not in get_catalog(fresh=True).names()


def test_a_live_report_offers_them_and_a_stale_one_does_not() -> None:
    sandbox_reports.report(True, host="host-a:1")
    assert sandbox_reports.offer(fresh=True).ok
    assert "python" in get_catalog(fresh=True).names()
    stale = time.time() - 10 * 90
    broker_client().hset(sandbox_reports.KEY, "host-a:1", json.dumps({"ok": True, "reason": "", "at": stale}))
    assert not sandbox_reports.offer(fresh=True).ok
    assert "python" not in get_catalog(fresh=True).names()


def test_a_worker_that_cannot_run_sandboxes_is_named_with_its_reason() -> None:
    sandbox_reports.report(False, "bubblewrap (bwrap) is not installed: apt-get install bubblewrap", host="host-b:7")
    offer = sandbox_reports.offer(fresh=True)
    assert not offer.ok
    assert "host-b:7: bubblewrap (bwrap) is not installed" in offer.reason
    assert [(host.host, host.ok) for host in offer.hosts] == [("host-b:7", False)]


@override_settings(CHATFORGE_SANDBOX_ENABLED=False, EMBEDDED=True)
def test_embedded_mode_offers_none_and_says_why() -> None:
    sandbox_reports.report(True, host="host-a:1")  # even a report does not change that
    offer = sandbox_reports.offer(fresh=True)
    assert not offer.ok and "embedded mode has no sandbox worker" in offer.reason
    assert "python" not in get_catalog(fresh=True).names()


def test_sandboxed_calls_go_to_the_sandbox_queue_under_the_admins_limits() -> None:
    sandbox_reports.report(True, host="host-a:1")
    forget_cached()
    assert tool_call_task("python") == TOOL_CALL_SANDBOX
    CodeToolLimits.objects.create(tool_name="python", sandbox_memory_mb=256, sandbox_cpu_s=3)
    python = get_catalog(fresh=True).get("python")
    assert python.policy.sandbox == SandboxLimits(**{**SandboxLimits().as_dict(), "memory_mb": 256, "cpu_s": 3})


def test_a_process_without_a_sandbox_gives_sandboxed_tools_none() -> None:
    assert sandbox_host.availability() is None  # the test process is no sandbox worker
    assert sandbox_host.sandbox_for(ToolPolicy(sandbox=SandboxLimits()), None) is None
    assert sandbox_host.sandbox_for(ToolPolicy(), None) is None


def test_the_sandbox_stops_a_little_before_the_tools_timeout() -> None:
    assert sandbox_host.wall_time(60) == 59
    assert sandbox_host.wall_time(4) == pytest.approx(3.6)
