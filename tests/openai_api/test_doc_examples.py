"""docs/openai-api.md's first Python example, run as written against an
embedded server (only the API key and the address change): the streamed
answer ends its line, so the next example's output starts on its own."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.stack import ROOT, base_env, free_port, start_server

pytestmark = pytest.mark.integration

DOC = ROOT / "docs" / "openai-api.md"


def first_python_example() -> str:
    section = DOC.read_text().split("## Pointing a client at ChatForge", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def test_the_streaming_and_plain_examples_print_their_answers_on_lines_of_their_own():
    example = first_python_example()
    assert 'api_key="cf_…"' in example and "http://127.0.0.1:8000/v1" in example
    workdir = Path(tempfile.mkdtemp(prefix="chatforge-doc-example-"))
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"), CHATFORGE_DEMO_TOKEN_DELAY_S="0")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    token = subprocess.run([sys.executable, "manage.py", "create_demo_user", "--token-only"], cwd=ROOT, env=env,
                           check=True, capture_output=True, text=True).stdout.strip()
    port = free_port()
    server = start_server(port=port, env=env, log_dir=workdir)
    try:
        script = example.replace('api_key="cf_…"', f'api_key="{token}"').replace(
            "http://127.0.0.1:8000/v1", f"http://127.0.0.1:{port}/v1")

        done = subprocess.run([sys.executable, "-c", script], cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=120, check=False)
    finally:
        server.stop()

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    streamed = next(line for line in lines if line.startswith("The current time in Asia/Tokyo"))
    assert streamed.endswith("17*23 = 391.") and streamed.count("391") == 1, lines  # alone on its line
    assert "17*23 = 391." in lines, lines  # the plain answer, on a line of its own
    assert lines[-1].startswith("[{'type': 'text'"), lines  # tool_events, then the conversation id
