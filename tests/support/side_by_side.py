"""Starting and stopping a stack's processes side by side rather than one
after another.

``tests/support/stack.py`` starts a process and waits until it is ready
before the next one (``start_server``, ``start_worker``) and stops a
stack's processes one at a time. A test that replaces several processes at
once (after SIGKILLing them) or ends a stack can launch them all and only
then wait for each: a Python process spends most of its start in imports
and a worker most of its warm shutdown waiting, so side by side the waits
overlap instead of adding up. What each process is and what it must reach
before the test goes on (a worker's ``ready.``, the server's ``/healthz``)
are the same as there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import httpx

from .stack import Process, start_process, wait_for


def launch_server(*, port: int, env: dict[str, str], log_dir: Path, name: str = "server", workers: int = 1,
                  host: str = "127.0.0.1", prefix: Sequence[str] = ()) -> Process:
    """``start_server``'s process, started but not yet waited for
    (``wait_for_server``)."""
    args = [sys.executable, "manage.py", "serve", "--host", host, "--port", str(port), "--workers", str(workers)]
    return start_process(name, args, env, log_dir, prefix)


def wait_for_server(proc: Process, *, port: int, host: str = "127.0.0.1", timeout: float = 60) -> None:
    """Until the server answers ``/healthz`` with 200, as ``start_server`` waits."""

    def healthy() -> bool:
        try:
            return httpx.get(f"http://{host}:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, timeout=timeout, what="the ASGI server", process=proc)


def stop_together(processes: Iterable[Process], timeout: float = 15.0) -> None:
    """``Process.stop`` for each, with every SIGTERM sent before the first
    wait: each still gets ``timeout`` for its warm shutdown, then SIGKILL.
    A stack's context manager skips what has already exited, so calling
    this just before it ends only changes how long the ending takes."""
    running = [proc for proc in processes if proc.popen.poll() is None]
    for proc in running:
        proc.popen.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait(5)
