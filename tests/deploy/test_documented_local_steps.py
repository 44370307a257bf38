"""The "Locally, as processes" steps of deploy/README.md, run as written on a
fresh Postgres cluster and Redis of the test's own: the exports (secret keys
made by the documented commands), createdb, migrate, create_demo_user, then
web, the four workers and beat from the documented commands (the Makefile
targets, which the manifest checks hold equal to the Procfile's), one run
of the demo model through the API to its end, and the sandbox worker's word
that it can run sandboxes (bubblewrap and .sandbox-python, as `make test`
installs them). Only the addresses change:
the database and Redis are private, the web port is a free one."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.support.private_services import private_postgres, private_redis
from tests.support.stack import ROOT, free_port

pytestmark = pytest.mark.integration

README = ROOT / "deploy" / "README.md"
# Settings the documented steps must set for distributed mode to start at all.
REQUIRED = {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "CHATFORGE_SECRET_KEYS"}


def documented_steps() -> list[str]:
    """The command lines of the section's shell block, comments dropped."""
    section = README.read_text().split("## Locally, as processes", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)[1]
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def shell_value(expression: str, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-c", f"printf %s {expression}"], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout


def start(command: str, env: dict[str, str], log_dir: Path, name: str) -> subprocess.Popen:
    log = open(log_dir / f"{name}.log", "w")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(shlex.split(command), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the whole group (make and the worker it started), as Ctrl-C in a terminal would."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def test_the_documented_local_steps_start_a_stack_that_completes_a_run():
    steps = documented_steps()
    exported = {line.split("=", 1)[0].removeprefix("export ") for line in steps if line.startswith("export ")}
    assert REQUIRED <= exported, f"deploy/README.md does not set {REQUIRED - exported}"

    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-docsteps-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in REQUIRED and not k.startswith(("CHATFORGE_", "DJANGO_"))}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"
    processes: list[subprocess.Popen] = []
    with private_postgres() as postgres, private_redis() as redis_server:
        try:
            token = ""
            for line in steps:
                if line.startswith("export "):
                    name, value = line.removeprefix("export ").split("=", 1)
                    env[name] = {"DATABASE_URL": postgres.url("chatforge"),
                                 "REDIS_URL": redis_server.url(0)}.get(name) or shell_value(value, env)
                elif line.startswith("createdb"):
                    postgres.execute("CREATE DATABASE chatforge")
                elif line == "make install":
                    continue  # the test environment is that install
                elif " serve " in line or line.startswith("make worker-") or line == "make beat":
                    command = re.sub(r"--port \d+", f"--port {port}", line)
                    processes.append(start(command, env, log_dir, command.split()[-1].replace("/", "-")))
                else:
                    done = subprocess.run(shlex.split(line), cwd=ROOT, env=env, capture_output=True, text=True,
                                          timeout=300)
                    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
                    token = re.search(r"API token: (\S+)", done.stdout)[1] if "API token:" in done.stdout else token
            assert token and len(processes) == 6, steps
            answer = complete_a_run(f"http://127.0.0.1:{port}", token, processes, log_dir)
            assert "391" in answer, answer
            wait_for_log(log_dir / "worker-sandbox.log", "this worker runs sandboxes", log_dir)
        finally:
            for process in processes:
                stop(process)


def complete_a_run(base: str, token: str, processes: list[subprocess.Popen], log_dir: Path) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 90
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        while True:
            try:
                if client.get("/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes), logs(log_dir)
            time.sleep(0.3)
        conversation = client.post("/api/conversations/").json()["id"]
        posted = client.post(f"/api/conversations/{conversation}/messages/", json={"content": "What is 17*23?"})
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]
        while (run := client.get(f"/api/runs/{run_id}/").json())["status"] not in ("completed", "failed", "cancelled"):
            assert time.monotonic() < deadline, (run, logs(log_dir))
            time.sleep(0.3)
        assert run["status"] == "completed", (run, logs(log_dir))
        messages = client.get(f"/api/conversations/{conversation}/messages/").json()
    return messages["results"][-1]["content"] if isinstance(messages, dict) else messages[-1]["content"]


def wait_for_log(path: Path, text: str, log_dir: Path) -> None:
    """The worker logs its probe's result once, at start (deploy/README.md, "The sandbox worker")."""
    deadline = time.monotonic() + 60
    while text not in (logged := path.read_text(errors="replace")):
        assert "cannot run sandboxes" not in logged, logs(log_dir)
        assert time.monotonic() < deadline, logs(log_dir)
        time.sleep(0.3)


def logs(log_dir: Path) -> str:
    return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in log_dir.glob("*.log"))
