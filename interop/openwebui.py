"""Open WebUI in front of a running ChatForge: `python -m interop.openwebui`
(``make interop-openwebui``), by hand, not in CI.

It installs Open WebUI (pinned, in ``.venv-openwebui/``, once), starts it
on a free loopback port with a throw-away data directory and ChatForge's
``/v1`` as its OpenAI connection, signs up its first user (its admin), and
chats through Open WebUI's own API the way its web page does (a Socket.IO
session, ``POST /api/chat/completions``, Stop). Then it reads ChatForge's
API to see what happened there. One PASS / FAIL line per check, with the
figures measured; exit status 1 if any check failed.

ChatForge: ``CHATFORGE_URL`` (default http://127.0.0.1:8000), running;
``CHATFORGE_TOKEN``, or, for a ChatForge on this machine, a token made with
``manage.py create_demo_user --token-only`` for a user of the check's own
(``openwebui-interop``), so the demo user's token stays valid and the
check's conversations are apart. Stop needs an answer that streams for a
while: run ChatForge with ``CHATFORGE_DEMO_TOKEN_DELAY_S`` (e.g. 0.05-0.2).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from interop.chatforge_api import ChatForge, Exchange
from interop.openwebui_api import OpenWebUI, TurnRequest, output_text
from interop.openwebui_install import OPEN_WEBUI_VERSION, ensure_venv
from interop.openwebui_server import TASK_MODEL, OpenWebUIProcess, start_openwebui
from interop.socketio_client import SocketEvent, SocketIOClient

REPO = Path(__file__).resolve().parent.parent
CHECK_USER = "openwebui-interop"
TOOLS_PROMPT = "What time is it in Tokyo, and what is 17*23?"
SECOND_PROMPT = "And what is 6*7?"
# The demo model echoes this back one word per token: long enough to stop mid-stream.
STOP_PROMPT = "Please echo: " + " ".join(f"word{i}" for i in range(400))
TURN_TIMEOUT_S = 120.0
CANCEL_WITHIN_S = 5.0
# Stop is pressed this long after the first text, so the answer is mid-stream.
STOP_AFTER_TEXT_S = 0.5


@dataclass
class Check:
    name: str
    status: str  # PASS, FAIL, or N/A (the feature is not there to check)
    detail: str
    figures: list[str] = field(default_factory=list)


@dataclass
class Turn:
    """One message sent from Open WebUI and what its socket said about it."""

    request: TurnRequest
    chat_id: str = ""
    answer: str = ""
    error: str = ""
    posted_s: float = 0.0  # POST /api/chat/completions answered
    first_text_s: float | None = None
    done_s: float | None = None
    idle_s: float | None = None  # chat:active false: answer and background tasks over


def _is_text(event: SocketEvent) -> bool:
    if event.type == "response:completion":
        return str(event.data.get("type", "")).endswith("output_text.delta")
    return event.type == "chat:completion" and bool(output_text(event.data.get("output")))


def _is_end(event: SocketEvent) -> bool:
    if event.type == "chat:message:error":
        return True
    return event.type == "chat:completion" and bool(event.data.get("done") or event.data.get("error"))


def _error_of(event: SocketEvent) -> str:
    error = event.data.get("error")
    if isinstance(error, dict):
        error = error.get("content") or error
    return str(error or "")


class Session:
    """Open WebUI's page, signed in, with its socket open."""

    def __init__(self, owui: OpenWebUI, sio: SocketIOClient, config: dict[str, Any], model_item: dict[str, Any]):
        self.owui, self.sio, self.config, self.model_item = owui, sio, config, model_item

    async def send(self, content: str, *, after: Turn | None = None) -> tuple[Turn, float]:
        request = TurnRequest(
            content=content,
            model_item=self.model_item,
            chat_id=after.chat_id if after else None,
            parent_id=after.request.assistant_message_id if after else None,
        )
        turn = Turn(request)
        began = time.monotonic()
        answer = await self.owui.send(request, session_id=self.sio.sid or "", config=self.config)
        turn.posted_s = time.monotonic() - began
        turn.chat_id = str(answer.get("chat_id") or "")
        return turn, began

    async def finish(self, turn: Turn, began: float) -> Turn:
        """Wait for the answer, then for the background tasks (the chat going idle)."""
        mine = turn.request.assistant_message_id
        first = await self.sio.wait_for(lambda e: e.message_id == mine and (_is_text(e) or _is_end(e)), TURN_TIMEOUT_S)
        if first is not None and _is_text(first):
            turn.first_text_s = first.at - began
        end = await self.sio.wait_for(lambda e: e.message_id == mine and _is_end(e), TURN_TIMEOUT_S)
        if end is not None:
            turn.done_s = end.at - began
            turn.error = _error_of(end)
            turn.answer = output_text(end.data.get("output"))
        idle = await self.sio.wait_for(
            lambda e: e.message_id == mine and e.type == "chat:active" and e.data.get("active") is False,
            TURN_TIMEOUT_S,
        )
        turn.idle_s = idle.at - began if idle else None
        if not turn.answer and turn.chat_id:
            turn.answer = await self._stored_answer(turn)
        return turn

    async def _stored_answer(self, turn: Turn) -> str:
        chat = await self.owui.chat(turn.chat_id)
        message = ((chat.get("chat") or {}).get("history") or {}).get("messages", {}).get(
            turn.request.assistant_message_id
        ) or {}
        return output_text(message.get("output")) or str(message.get("content") or "")


def _secs(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "—"


def _excerpt(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _calls_text(calls: list[dict[str, Any]]) -> str:
    return ", ".join(f"{c['name']} ({c['status'] or 'no result'})" for c in calls) or "none"


def _turn_figures(turn: Turn) -> list[str]:
    return [
        (
            f"POST answered in {_secs(turn.posted_s)}, first text at {_secs(turn.first_text_s)}, "
            f"answer done at {_secs(turn.done_s)}, chat idle at {_secs(turn.idle_s)}"
        ),
        f"answer: {_excerpt(turn.answer)!r}" + (f"; error: {_excerpt(turn.error, 300)!r}" if turn.error else ""),
    ]


async def check_models(owui: OpenWebUI, chatforge_models: list[str]) -> tuple[Check, dict[str, Any] | None]:
    models = await owui.models()
    ids = [m.get("id") for m in models]
    demo = next((m for m in models if m.get("id") == "demo"), None)
    check = Check(
        "models listed",
        "PASS" if demo else "FAIL",
        "ChatForge's 'demo' is among Open WebUI's models" if demo else f"no 'demo' among {ids}",
        [f"Open WebUI lists {len(ids)}: {', '.join(map(str, ids))}; ChatForge /v1/models: {', '.join(chatforge_models)}"],
    )
    return check, demo


async def exchanges_for(chatforge: ChatForge, since: float, prompt: str) -> list[Exchange]:
    """The ``/v1`` requests Open WebUI sent for one of the chat's messages."""
    return [e for e in await chatforge.exchanges_since(since) if e.user_text.strip() == prompt.strip()]


async def _runs(chatforge: ChatForge, exchanges: list[Exchange]) -> list[dict[str, Any]]:
    return [await chatforge.run(e.answer["run"]) for e in exchanges if e.answer]


def _offered(run: dict[str, Any]) -> str:
    options = run.get("options") or {}
    tools = options.get("tools")
    return (
        f"offered server tools {', '.join(tools) if tools else ('defaults' if tools is None else 'none')}"
        f" + {len(options.get('client_tools') or [])} of Open WebUI's own"
    )


async def check_tools(
    session: Session, chatforge: ChatForge, since: float, server_tools: set[str]
) -> tuple[Check, Turn, list[Exchange]]:
    turn, began = await session.send(TOOLS_PROMPT)
    await session.finish(turn, began)
    exchanges = await exchanges_for(chatforge, since, TOOLS_PROMPT)
    calls = [call for e in exchanges for call in e.tool_calls()]
    server_calls = [c for c in calls if c["name"] in server_tools]
    client_calls = [c for c in calls if c["name"] not in server_tools]
    ran = [c for c in server_calls if c["status"] == "success"]
    runs = await _runs(chatforge, exchanges)
    problems = []
    if "391" not in turn.answer:
        problems.append("the answer lacks 391")
    if not ran:
        problems.append("ChatForge ran no server tool for it")
    figures = _turn_figures(turn) + [
        f"ChatForge: {len(exchanges)} /v1 request(s) for it; run(s) "
        + "; ".join(f"{r['status']} (model {r['model']}, finish {r.get('finish_reason')}, {_offered(r)})" for r in runs),
        f"server tool calls: {_calls_text(server_calls)}; client (Open WebUI) tool calls: {_calls_text(client_calls)}",
    ]
    detail = (
        f"answer has 391; ChatForge ran {', '.join(sorted({c['name'] for c in ran}))}"
        if not problems
        else "; ".join(problems)
    )
    return Check("server tools chat", "FAIL" if problems else "PASS", detail, figures), turn, exchanges


async def check_second_turn(
    session: Session, chatforge: ChatForge, since: float, first: Turn, first_exchanges: list[Exchange]
) -> tuple[Check, Turn]:
    turn, began = await session.send(SECOND_PROMPT, after=first)
    await session.finish(turn, began)
    exchanges = await exchanges_for(chatforge, since, SECOND_PROMPT)
    first_conversations = {e.conversation_id for e in first_exchanges}
    continued = [e for e in exchanges if e.conversation_id in first_conversations]
    same_chat = turn.chat_id == first.chat_id
    ok = bool(turn.answer.strip()) and not turn.error and same_chat
    detail = "an answer in the same chat" if ok else (
        "no answer" if not turn.answer.strip() else "an error" if turn.error else f"another chat ({turn.chat_id})"
    )
    figures = _turn_figures(turn) + [
        f"ChatForge: {len(exchanges)} /v1 request(s) for it, "
        + ("in the first turn's conversation (continued)" if continued else "in a conversation of its own")
    ]
    return Check("second turn", "PASS" if ok else "FAIL", detail, figures), turn


async def check_stop(session: Session, chatforge: ChatForge, since: float) -> Check:
    name = "stop cancels the run"
    turn, began = await session.send(STOP_PROMPT)
    mine = turn.request.assistant_message_id
    first = await session.sio.wait_for(lambda e: e.message_id == mine and (_is_text(e) or _is_end(e)), TURN_TIMEOUT_S)
    if first is None or not _is_text(first):
        reason = f"{first.type} {_error_of(first)}" if first else "nothing"
        return Check(name, "FAIL", "no text streamed; nothing to stop", [f"first event: {reason}"])
    ended_early = await session.sio.wait_for(lambda e: e.message_id == mine and _is_end(e), STOP_AFTER_TEXT_S)
    streamed = output_text(ended_early.data.get("output")) if ended_early else ""
    stop_at, stop_wall = time.monotonic(), time.time()
    answer = await session.owui.stop_chat(turn.chat_id)
    stop_answered_s = time.monotonic() - stop_at
    figures = [
        (
            f"first text at {_secs(first.at - began)}, Stop sent at {_secs(stop_at - began)} "
            f"(answered in {_secs(stop_answered_s)}: {answer})"
        )
    ]
    ended: list[Exchange] = []
    seen_s: float | None = None
    while time.monotonic() - stop_at < 3 * CANCEL_WITHIN_S:
        ended = [e for e in await exchanges_for(chatforge, since, STOP_PROMPT) if e.answer]
        if ended:
            seen_s = time.monotonic() - stop_at
            break
        await asyncio.sleep(0.2)
    if not ended:
        return Check(name, "FAIL", f"ChatForge's run had not ended {3 * CANCEL_WITHIN_S:g} s after Stop", figures)
    run = await chatforge.run(ended[-1].answer["run"])
    finished = datetime.fromisoformat(run["finished_at"]).timestamp() if run.get("finished_at") else None
    ended_after = finished - stop_wall if finished is not None else None
    figures.append(
        f"ChatForge run {run['id']}: {run['status']}, ended {_secs(ended_after)} after Stop "
        f"(seen through its API {_secs(seen_s)} after); stored answer "
        f"{len(ended[-1].answer.get('content') or '')} characters, tool calls {_calls_text(ended[-1].tool_calls())}"
    )
    ok = run["status"] == "cancelled" and ended_after is not None and ended_after <= CANCEL_WITHIN_S
    if ok:
        detail = f"the run ended cancelled {_secs(ended_after)} after Stop"
    elif ended_early is not None:
        detail = f"the answer ended ({len(streamed)} characters) before Stop was sent: make it stream longer"
    else:
        detail = f"the run ended {run['status']} {_secs(ended_after)} after Stop"
        if run["status"] == "completed":
            detail += (" (if the answer was that close to its end, make it longer: run ChatForge with "
                       "CHATFORGE_DEMO_TOKEN_DELAY_S=0.2)")
    return Check(name, "PASS" if ok else "FAIL", detail, figures)


def _task_kind(prompt: str) -> str:
    """Which of Open WebUI's task prompts (its default templates) this is."""
    head = " ".join(prompt.split("### Guidelines")[0].lower().split())
    for kind, words in (("title", ("title",)), ("tags", ("tags",)), ("follow-ups", ("follow-up", "send next"))):
        if any(word in head for word in words):
            return kind
    return "other"


async def settled_exchanges(chatforge: ChatForge, since: float, timeout_s: float = 90.0) -> list[Exchange]:
    """The exchanges once every one has its answer (background tasks end late)."""
    deadline = time.monotonic() + timeout_s
    while True:
        exchanges = await chatforge.exchanges_since(since)
        if all(e.answer for e in exchanges) or time.monotonic() > deadline:
            return exchanges
        await asyncio.sleep(1.0)


async def check_background(chatforge: ChatForge, since: float, sio: SocketIOClient, alias_listed: bool) -> Check:
    name = f"background tasks on {TASK_MODEL}"
    ours = {p.strip() for p in (TOOLS_PROMPT, SECOND_PROMPT, STOP_PROMPT)}
    background = [e for e in await settled_exchanges(chatforge, since) if e.user_text.strip() not in ours]
    rows = []
    for e in background:
        run = await chatforge.run(e.answer["run"]) if e.answer else {}
        rows.append((_task_kind(e.user_text), e.source, run.get("model"), run.get("status"), e.tool_calls()))
    emitted = {kind: sum(event.type == kind for event in sio.events)
               for kind in ("chat:title", "chat:tags", "chat:message:follow_ups")}
    figures = [
        f"{len(rows)} background request(s) reached ChatForge: "
        + ("; ".join(f"{kind} → source {source}, answered by {model}, {status}, tool calls: {_calls_text(calls)}"
                     for kind, source, model, status, calls in rows) or "none"),
        "Open WebUI emitted " + ", ".join(f"{kind} ×{n}" for kind, n in emitted.items()),
    ]
    with_tools = [row for row in rows if row[4]]
    if not alias_listed:
        models = sorted({str(row[2]) for row in rows})
        return Check(
            name, "N/A",
            f"not available: ChatForge's /v1/models lists no '{TASK_MODEL}', so Open WebUI sent its background "
            f"tasks to {', '.join(models) or 'nothing'}; {len(with_tools)} of {len(rows)} ran tools",
            figures,
        )
    # Only requests for the alias become source "task" conversations (docs/openai-api.md).
    elsewhere = [row for row in rows if row[1] != "task"]
    ok = bool(rows) and not elsewhere and not with_tools
    if ok:
        detail = f"all {len(rows)} went to {TASK_MODEL} (source task) and ran no tools"
    elif rows:
        detail = f"{len(elsewhere)} of {len(rows)} went to another model, {len(with_tools)} ran tools"
    else:
        detail = "no background request reached ChatForge"
    return Check(name, "PASS" if ok else "FAIL", detail, figures)


def chatforge_token(url: str) -> tuple[str, str]:
    """``CHATFORGE_TOKEN``, or a fresh one for the check's user of a ChatForge on this machine."""
    if os.environ.get("CHATFORGE_TOKEN"):
        return os.environ["CHATFORGE_TOKEN"], "CHATFORGE_TOKEN"
    if urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"{url} is not on this machine: set CHATFORGE_TOKEN to an API token of that ChatForge.")
    made = subprocess.run(
        [sys.executable, "manage.py", "create_demo_user", "--username", CHECK_USER,
         "--password", secrets.token_urlsafe(16), "--token-only"],
        check=False, cwd=REPO, capture_output=True, text=True,
    )
    tokens = [line.strip() for line in made.stdout.splitlines() if line.strip().startswith("cf_")]
    if made.returncode != 0 or not tokens:
        raise SystemExit(f"manage.py create_demo_user failed ({made.returncode}): {made.stderr.strip()[-800:]}")
    return tokens[-1], f"create_demo_user --username {CHECK_USER} --token-only"


def print_check(check: Check) -> None:
    print(f"{check.status:<4}  {check.name}: {check.detail}")
    for figure in check.figures:
        print(f"        {figure}")
    sys.stdout.flush()


async def run_checks(server: OpenWebUIProcess, chatforge: ChatForge, alias_listed: bool) -> list[Check]:
    owui = OpenWebUI(server.url)
    sio: SocketIOClient | None = None
    checks: list[Check] = []
    try:
        version = await owui.version()
        print(f"Open WebUI {version} on {server.url} (started in {server.startup_s:.1f} s)")
        await owui.sign_up("Interop Check", "interop@example.com", secrets.token_urlsafe(12) + "Aa1!")
        config = await owui.config()
        sio = SocketIOClient(server.url, owui.token or "")
        await sio.connect()
        server_tools = await chatforge.tool_names()
        since = time.time() - 0.5

        check, demo = await check_models(owui, await chatforge.v1_model_ids())
        checks.append(check)
        print_check(check)
        if demo is None:
            return checks
        session = Session(owui, sio, config, demo)
        tools_check, first, first_exchanges = await check_tools(session, chatforge, since, server_tools)
        checks.append(tools_check)
        print_check(tools_check)
        second_check, _second = await check_second_turn(session, chatforge, since, first, first_exchanges)
        checks.append(second_check)
        print_check(second_check)
        checks.append(await check_stop(session, chatforge, since))
        print_check(checks[-1])
        checks.append(await check_background(chatforge, since, sio, alias_listed))
        print_check(checks[-1])
        return checks
    finally:
        if sio is not None:
            await sio.close()
        await owui.aclose()


async def main_async(args: argparse.Namespace) -> int:
    url = args.chatforge_url.rstrip("/")
    install = ensure_venv(args.venv)
    print(
        f"Open WebUI {OPEN_WEBUI_VERSION} venv {install.venv.name}: "
        + ("reused" if install.reused else f"installed in {install.seconds:.0f} s (torch from {install.torch_source})")
        + f", torch {install.torch}, {install.size_mb} MB"
    )
    token, token_source = chatforge_token(url)
    chatforge = ChatForge(url, token)
    try:
        try:
            chatforge_models = await chatforge.v1_model_ids()
        except Exception as error:  # noqa: BLE001 - any failure here means "not reachable as configured"
            print(f"FAIL  ChatForge at {url}: {error}")
            return 1
        alias_listed = TASK_MODEL in chatforge_models
        print(f"ChatForge {url} (token: {token_source}); /v1/models: {', '.join(chatforge_models)}")
        server = start_openwebui(args.venv, chatforge_url=url, chatforge_token=token)
        checks: list[Check] = []
        try:
            checks = await run_checks(server, chatforge, alias_listed)
        except Exception as error:  # noqa: BLE001 - reported as a failed run, with Open WebUI's log
            checks.append(Check("run", "FAIL", f"{type(error).__name__}: {error}"))
            print_check(checks[-1])
        failed = [c for c in checks if c.status == "FAIL"]
        keep = bool(failed) or args.keep
        if failed:
            print(f"Open WebUI's log (kept): {server.log_path}\n--- last lines ---\n{server.log_tail(25)}")
        server.stop(keep_data=keep)
        counts = {s: sum(c.status == s for c in checks) for s in ("PASS", "FAIL", "N/A")}
        print(f"{counts['PASS']} passed, {counts['FAIL']} failed" + (f", {counts['N/A']} not available" if counts["N/A"] else ""))
        return 1 if failed else 0
    finally:
        await chatforge.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chatforge-url", default=os.environ.get("CHATFORGE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--venv", type=Path, default=REPO / ".venv-openwebui", help="Open WebUI's own venv")
    parser.add_argument("--keep", action="store_true", help="keep Open WebUI's data directory and log")
    args = parser.parse_args()
    args.venv = args.venv.resolve()
    raise SystemExit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()

