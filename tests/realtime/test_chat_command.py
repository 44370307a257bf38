"""``manage.py chat``: a run watched live from the terminal — in embedded
mode (the command starts the in-process worker) and against the workers of
the distributed stack."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from chatforge.conversations.models import Conversation, Message
from tests.fakes.openai_server import Reply
from tests.support.stack import ROOT, base_env

pytestmark = pytest.mark.integration

QUESTION = "What time is it in Tokyo, and what is 17*23?"


def chat(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "chat", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def embedded_env() -> dict[str, str]:
    workdir = Path(tempfile.mkdtemp(prefix="chatforge-chat-"))
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"), CHATFORGE_DEMO_TOKEN_DELAY_S="0")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([sys.executable, "manage.py", "create_demo_user", "--token-only"], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    return env


def test_make_chat_needs_no_activated_venv(embedded_env):
    """The documented ``make chat MESSAGE=…``, with no virtualenv on PATH."""
    env = {**embedded_env, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["make", "-s", "chat", "MESSAGE=What is 17*23?"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "391" in done.stdout and "[completed: stop" in done.stdout


def test_one_message_in_embedded_mode(embedded_env):
    done = chat([QUESTION], embedded_env)

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^conversation [0-9a-f-]{36}$", out, re.M), out
    assert re.search(r"^→ get_time\(.*\)", out, re.M), out
    assert re.search(r"^→ calculator\(.*17\s*\*\s*23.*\)", out, re.M), out
    assert re.search(r"^← calculator success in \d+ ms: .*391", out, re.M), out
    assert re.search(r"^← get_time success", out, re.M), out
    assert "391" in out.split("← calculator")[-1].split("[completed")[0]  # the answer, streamed after the tools
    assert out.rstrip().splitlines()[-1].startswith("[completed: stop")


# A log line of the text format: "2026-01-01T00:00:00.000000Z [info     ] …".
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ \[\s*(debug|info|warning|error|critical)\s*\]", re.MULTILINE)


def test_the_transcript_is_not_buried_in_log_lines(embedded_env):
    """The embedded worker runs inside the command: its INFO lines (Celery's
    "Task … received/succeeded", the engine's) stay off the terminal unless
    asked for with -v 2."""
    done = chat(["What is 17*23?"], embedded_env)

    assert done.returncode == 0, done.stdout + done.stderr
    assert not LOG_LINE.search(done.stderr), done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"conversation [0-9a-f-]{36}", lines[0]), lines
    assert any(line.startswith("→ calculator(") for line in lines), lines
    assert any(line.startswith("← calculator success in ") for line in lines), lines
    assert lines[-1].startswith("[completed: stop"), lines
    assert not LOG_LINE.search(done.stdout), done.stdout

    verbose = chat(["-v", "2", "What is 17*23?"], embedded_env)

    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    infos = [match.group(0) for match in LOG_LINE.finditer(verbose.stderr) if match.group(1) == "info"]
    assert infos and "Task chatforge.llm_turn[" in verbose.stderr, verbose.stderr


def test_interactive_loop_continues_a_conversation(embedded_env):
    first = chat(["What is 2+2?"], embedded_env)
    conversation_id = re.search(r"^conversation (\S+)$", first.stdout, re.M).group(1)

    done = chat(["--conversation", conversation_id], embedded_env, stdin="What is 3*3?\n\nWhat is 10-4?\n")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("[completed") == 2
    assert "9" in done.stdout and "6" in done.stdout
    unknown = chat(["--conversation", "00000000-0000-0000-0000-000000000000", "hi"], embedded_env)
    assert unknown.returncode != 0 and "has no conversation" in unknown.stderr
    nobody = chat(["--user", "nobody", "hi"], embedded_env)
    assert nobody.returncode != 0 and "create_demo_user" in nobody.stderr


@pytest.mark.django_db(transaction=True)
def test_chat_against_the_distributed_workers(stack, fake_llm, make_user):
    fake_llm.add_script("chat-cli", [Reply(text="Let me echo.", tool_calls=[("echo", {"text": "ping"})]),
                                     Reply(text="The echo said ping.")])
    user, _ = make_user()

    done = chat(["--user", user.username, "--model", "chat-cli", "echo ping please"], stack.env)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "Let me echo."
    assert lines[2].startswith('→ echo({"text": "ping"})') or lines[2].startswith('→ echo({"text":"ping"})'), lines
    assert lines[3].startswith("← echo success in ") and lines[3].endswith(": ping")
    assert lines[4] == "The echo said ping."
    assert lines[5].startswith("[completed: stop")
    conversation = Conversation.objects.get(user=user)
    assert Message.objects.filter(conversation=conversation, role="assistant").get().content == "The echo said ping."


@pytest.mark.django_db(transaction=True)
def test_interactive_chat_and_ctrl_c_against_the_distributed_workers(stack, fake_llm, make_user):
    import signal
    import time

    fake_llm.add_script("chat-cli-loop", lambda body: Reply(text=f"Reply number {len(body['messages'])}."))
    fake_llm.add_script("chat-cli-slow", [Reply(text=" ".join(f"t{i}" for i in range(400)), chunk_delay_s=0.05)])
    user, _ = make_user()

    done = chat(["--user", user.username, "--model", "chat-cli-loop"], stack.env, stdin="one\ntwo\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Reply number 1." in done.stdout and "Reply number 3." in done.stdout
    assert done.stdout.count("[completed") == 2

    process = subprocess.Popen(
        [sys.executable, "manage.py", "chat", "--user", user.username, "--model", "chat-cli-slow", "go on"],
        cwd=ROOT, env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # As from a terminal: a test run started in the background (``make test &``)
        # ignores SIGINT, children inherit that, and Python then installs no
        # KeyboardInterrupt handler, so Ctrl-C would never arrive.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while Conversation.objects.filter(user=user, runs__status="running",
                                      runs__model="chat-cli-slow").count() == 0:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert "[cancelling" in out and out.rstrip().endswith("[cancelled]"), out + err
    assert process.returncode == 1 and "ended cancelled" in err


def test_a_call_that_needs_approval_is_asked_about_at_the_terminal(embedded_env):
    """stdin a terminal: the command asks, and the answer decides the call."""
    import os
    import pty

    subprocess.run([sys.executable, "manage.py", "shell", "-c",
                    "from chatforge.catalog.models import ToolDefinition as T; "
                    "T.objects.get_or_create(name='send_note', defaults=dict(description='Send a note to the team.', "
                    "kind='mock', mock_response={'sent': True}, requires_approval=True, "
                    "parameters={'type': 'object', 'properties': {'text': {'type': 'string'}}, 'required': ['text']}))"],
                   cwd=ROOT, env=embedded_env, check=True)
    primary, secondary = pty.openpty()
    try:
        os.write(primary, b"Not today\n")  # waits in the terminal until the command asks
        done = subprocess.run([sys.executable, "manage.py", "chat", "--tools", "send_note", 'send_note "hi team"'],
                              cwd=ROOT, env=embedded_env, stdin=secondary, capture_output=True, text=True,
                              timeout=120)
    finally:
        os.close(primary)
        os.close(secondary)

    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert re.search(r"^\? send_note\(.*hi team.*\) needs approval", out, re.M), out
    # (the prompt's line ends where the person pressed Enter, on the terminal)
    assert re.search(r"approve\? .*  deny \(by demo\): Not today$", out, re.M), out
    assert re.search(r"^← send_note error in \d+ ms: Error: the user declined to run 'send_note'", out, re.M), out
