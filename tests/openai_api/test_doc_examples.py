"""docs/openai-api.md's first Python example, run as written against an
embedded server (only the API key and the address change): the streamed
answer ends its line, so the next example's output starts on its own."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.stack import ROOT, embedded_server

pytestmark = pytest.mark.integration

DOC = ROOT / "docs" / "openai-api.md"


def first_python_example() -> str:
    section = DOC.read_text().split("## Pointing a client at ChatForge", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def test_the_streaming_and_plain_examples_print_their_answers_on_lines_of_their_own():
    example = first_python_example()
    assert 'api_key="cf_…"' in example and "http://127.0.0.1:8000/v1" in example
    with embedded_server(prefix="chatforge-doc-example-", CHATFORGE_DEMO_TOKEN_DELAY_S="0") as server:
        script = example.replace('api_key="cf_…"', f'api_key="{server.token}"').replace(
            "http://127.0.0.1:8000/v1", f"{server.url}/v1")
        done = subprocess.run([sys.executable, "-c", script], cwd=server.workdir, env=server.env,
                              capture_output=True, text=True, timeout=120, check=False)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    streamed = next(line for line in lines if line.startswith("The current time in Asia/Tokyo"))
    assert streamed.endswith("17*23 = 391.") and streamed.count("391") == 1, lines  # alone on its line
    assert "17*23 = 391." in lines, lines  # the plain answer, on a line of its own
    assert lines[-1].startswith("[{'type': 'text'"), lines  # tool_events, then the conversation id
