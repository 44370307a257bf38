"""The README's "Using the API" commands, pasted as written into a shell
against the server ``make run PORT=…`` starts: only the token (which
``make run`` prints) and the address change. The ids are captured by the
commands themselves, and the run is followed to its end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.support.stack import ROOT, base_env, free_port, start_process, wait_for

pytestmark = pytest.mark.integration

README = ROOT / "README.md"


def api_block() -> str:
    section = README.read_text().split("## Using the API", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.DOTALL)[1]


def test_the_readme_api_commands_run_as_written_against_make_run():
    block = api_block()
    assert not re.search(r"<\w+>", block), "a placeholder the reader cannot fill from the output"
    assert re.search(r"^TOKEN=\S+", block, re.MULTILINE) and re.search(r"^BASE=\S+", block, re.MULTILINE)

    workdir = Path(tempfile.mkdtemp(prefix="chatforge-readme-"))
    port = free_port()
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"), CHATFORGE_DEMO_TOKEN_DELAY_S="0")
    server = start_process("make-run", ["make", "-s", "run", f"PORT={port}"], env, workdir)
    try:
        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout=300, what="make run", process=server)
        token = re.search(r"^API token: (\S+)", server.log(), re.MULTILINE)[1]
        script = re.sub(r"^TOKEN=\S+", f"TOKEN={token}", block, flags=re.MULTILINE)
        script = re.sub(r"^BASE=\S+", f"BASE=http://127.0.0.1:{port}", script, flags=re.MULTILINE)

        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=120, check=False)

        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stderr == "", done.stderr
        events = re.findall(r"^event: (\S+)$", done.stdout, re.MULTILINE)
        assert events[0] == "run.started" and events[-1] == "run.completed", events
        assert "tool_call" in events
        messages = json.loads(done.stdout.rstrip().splitlines()[-1])["results"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert "35" in messages[1]["content"], messages
    finally:
        os.killpg(server.popen.pid, signal.SIGTERM)
        server.popen.wait(30)
