"""Chat from the terminal: start or continue a conversation and watch each
run live — streamed text, tool calls and their outputs, the final status.

    python manage.py chat "What time is it in Tokyo, and what is 17*23?"
    python manage.py chat --conversation <id> --model demo        # interactive

It calls the services directly (``run_start``) and follows the run's event
log like a websocket client would, so it works against the workers in
distributed mode; in embedded mode it starts the in-process worker itself.
Ctrl-C while a run streams asks the run to stop; a second Ctrl-C quits.
Log lines below WARNING (the worker's "Task … received", the engine's "run
accepted", …) are kept off the terminal; ``-v 2`` shows them.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import sys
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from chatforge.conversations.models import Conversation, Run
from chatforge.errors import ChatForgeError
from orchestration.embedded_worker import start_embedded_worker
from orchestration.event_log.events import TERMINAL_TYPES
from orchestration.services.approvals import decide
from orchestration.services.run_follower import follow_run
from orchestration.services.runs import RunOptions, run_request_cancel, run_start

OUTPUT_PREVIEW_CHARS = 500


def quiet_logs() -> None:
    """Keep the transcript readable: in embedded mode the worker runs in this
    process, and each run would add a dozen INFO lines (Celery's "Task …
    received/succeeded", the engine's, the start-up GC freeze) to the
    terminal between the answer's lines. Warnings and errors still show.

    The level is set on the handlers, not on loggers, so a logger that sets
    its own level is held back too; and it is set in ``settings.LOGGING``,
    because starting the embedded worker runs ``django.setup()`` again
    (Celery's Django fixup), which re-applies that configuration. Kombu's
    "No hostname was supplied" warning is about the in-memory broker of
    embedded mode, which has no host: it says nothing to someone chatting.
    """
    config = dict(settings.LOGGING)
    config["handlers"] = {name: {**handler, "level": "WARNING"} for name, handler in config["handlers"].items()}
    if settings.EMBEDDED:
        config["loggers"] = {**config.get("loggers", {}), "kombu.connection": {"level": "ERROR"}}
    settings.LOGGING = config
    logging.config.dictConfig(config)


def _preview(text: str, limit: int = OUTPUT_PREVIEW_CHARS) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


class Command(BaseCommand):
    help = ("Chat with ChatForge from the terminal, watching each run live (text, tool calls, outputs). "
            "Log lines below WARNING are shown with -v 2.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("message", nargs="?", help="The message to send; without it, read messages from stdin.")
        parser.add_argument("--user", default="demo", help="Username to chat as (default: demo).")
        parser.add_argument("--conversation", help="Continue this conversation (default: start a new one).")
        parser.add_argument("--model", default="", help="Model for the runs (default: the server's default).")
        parser.add_argument("--tools", help="Comma-separated tool names to offer (default: all enabled).")
        parser.add_argument("--max-iterations", type=int, default=None)

    def handle(self, *args, message: str | None, user: str, conversation: str | None, model: str,
               tools: str | None, max_iterations: int | None, **options) -> None:
        if options.get("verbosity", 1) < 2:
            quiet_logs()
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(
                f"No user named '{user}'. Create it with `python manage.py create_demo_user --username {user}` "
                "or pass --user."
            )
        self._account = account
        chat = self._conversation(account, conversation)
        if settings.EMBEDDED:
            start_embedded_worker()
        run_options = RunOptions(
            model=model,
            tools=[t.strip() for t in tools.split(",") if t.strip()] if tools is not None else None,
            max_iterations=max_iterations,
        )
        self.stdout.write(f"conversation {chat.id}")
        # One event loop for the whole session: async Redis clients belong to one.
        self._loop = asyncio.new_event_loop()
        try:
            self._session(account, chat, message, run_options)
        finally:
            self._loop.close()

    def _session(self, account, chat: Conversation, message: str | None, run_options: RunOptions) -> None:
        if message is not None:
            status = self._exchange(account, chat, message, run_options)
            if status != Run.Status.COMPLETED:
                raise CommandError(f"The run ended {status}.", returncode=1)
            return
        interactive = sys.stdin.isatty()
        while True:
            if interactive:
                self.stdout.write("you> ", ending="")
                self.stdout.flush()
            try:
                line = sys.stdin.readline()
            except KeyboardInterrupt:
                self.stdout.write("")
                return
            if not line:
                return
            line = line.strip()
            if line in {"exit", "quit", "/exit", "/quit"}:
                return
            if line:
                self._exchange(account, chat, line, run_options)

    def _conversation(self, account, conversation_id: str | None) -> Conversation:
        if conversation_id is None:
            return Conversation.objects.create(user=account)
        try:
            chat = Conversation.objects.filter(user=account, pk=conversation_id).first()
        except (ValueError, ValidationError):
            chat = None
        if chat is None:
            raise CommandError(f"User '{account.get_username()}' has no conversation {conversation_id}.")
        return chat

    def _exchange(self, account, chat: Conversation, content: str, options: RunOptions) -> str:
        try:
            run = run_start(user=account, conversation=chat, content=content, options=options)
        except ChatForgeError as exc:
            self.stderr.write(f"error: {exc.message}")
            return "refused"
        if not self._follow_until_end(str(run.id)):
            self.stdout.write("\n[cancelling… press Ctrl-C again to quit]")
            run_request_cancel(run=run)
            if not self._follow_until_end(str(run.id), quiet=True):
                raise CommandError("Interrupted; the run was asked to stop.", returncode=130)
        run.refresh_from_db(fields=["status"])
        return run.status

    def _follow_until_end(self, run_id: str, *, quiet: bool = False) -> bool:
        """Follow the run to its end on the command's event loop; False on Ctrl-C."""
        task = self._loop.create_task(self._follow(run_id, quiet=quiet))
        try:
            self._loop.run_until_complete(task)
            return True
        except KeyboardInterrupt:
            task.cancel()
            self._loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
            return False

    async def _follow(self, run_id: str, *, quiet: bool = False) -> None:
        at_line_start = True
        async for event in follow_run(run_id, after=0):
            if quiet and event["type"] not in TERMINAL_TYPES:
                continue
            text, inline = self._render(event)
            if text is None:
                continue
            if inline:
                self.stdout.write(text, ending="")
                at_line_start = text.endswith("\n")
            else:
                if not at_line_start:
                    self.stdout.write("")
                self.stdout.write(text)
                if event["type"] == "approval.required" and not quiet:
                    await self._ask_approval(run_id, event["data"])
                at_line_start = True
            self.stdout.flush()

    async def _ask_approval(self, run_id: str, request: dict[str, Any]) -> None:
        """At a terminal, ask; otherwise say where the call can be decided
        (the run waits, holding no worker, until it is decided or lapses)."""
        if not sys.stdin.isatty():
            self.stdout.write(f"  (decide with POST /api/runs/{run_id}/tool-calls/{request['tool_call_id']}/decision/ "
                              "or on the chat page)")
            return
        answer = (await asyncio.to_thread(input, "  approve? [y = yes; anything else denies, as its reason] ")).strip()
        approve = answer.lower() in {"y", "yes"}
        try:
            await database_sync_to_async(decide)(run_id=run_id, tool_call_id=request["tool_call_id"], user=self._account,
                                        decision="approve" if approve else "deny",
                                        reason="" if approve or answer.lower() in {"", "n", "no"} else answer)
        except ChatForgeError as exc:
            self.stderr.write(f"error: {exc.message}")

    def _render(self, event: dict[str, Any]) -> tuple[str | None, bool]:
        """(text, inline): inline text continues the current line."""
        kind, data = event["type"], event.get("data") or {}
        if kind == "content.delta":
            return data.get("text", ""), True
        if kind == "tool_call":
            return f"→ {data['name']}({data['arguments']})  [{data['id']}]", False
        if kind == "tool_output":
            return (f"← {data['name']} {data['status']} in {data.get('execution_time_ms', 0)} ms: "
                    f"{_preview(str(data.get('output', '')))}"), False
        if kind == "tool.retry":
            return f"↻ tool call {data['tool_call_id']} attempt {data['attempt']} failed: {data['error']}", False
        if kind == "llm.retry":
            return f"↻ model call failed ({data['error']}); retrying in {data['retry_in_s']} s", False
        if kind == "run.reconnecting":
            return "↻ reconnecting the run… (its worker was lost; the step runs again on another)", False
        if kind == "approval.required":
            return f"? {data['name']}({data['arguments']}) needs approval", False
        if kind == "approval.decided":
            who = "no decision in time" if data.get("expired") else f"by {data.get('by')}"
            return f"  {data['decision']} ({who}){': ' + data['reason'] if data.get('reason') else ''}", False
        if kind == "snapshot":
            summary = (f"[events were lost; state from the database: {data['status']}, "
                       f"{len(data.get('rounds') or [])} tool round(s)]")
            if data.get("message"):
                summary += "\n" + data["message"]["content"]
            return summary, False
        if kind == "run.completed":
            usage = data.get("usage") or {}
            tokens = f", {usage['total_tokens']} tokens" if "total_tokens" in usage else ""
            capped = ", iteration cap reached" if data.get("max_iterations_reached") else ""
            return f"[completed: {data.get('finish_reason') or 'stop'}{tokens}{capped}]", False
        if kind == "run.failed":
            return f"[failed: {data.get('error')}]", False
        if kind == "run.cancelled":
            return "[cancelled]", False
        return None, False  # run.started, llm.started, reasoning.delta: nothing to show
