"""A sandboxed run as a tool call sees it: the conversation's files go in,
the files the code left in its output directory come back as files of the
conversation, and how it ended becomes the text the model reads.

Shared by the ``python`` tool and the admin's script tools, so that both
read the same files, keep the same limits and speak to the model alike
(docs/sandbox.md). Failures are ``ToolError``s whose text says what
happened and what to do instead: the model's next call can fix them.
"""

from __future__ import annotations

import json
import os
import posixpath
import signal
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tools.errors import ToolError
from tools.files import FileAccess, FileInfo
from tools.sandbox.command import INPUT_DIR, OUTPUT_DIR
from tools.sandbox_limits import SandboxLimits
from tools.sandbox.runner import InputFile, SandboxOutcome

if TYPE_CHECKING:
    from tools.base import ToolContext

MAX_INPUT_FILES = 50
MAX_INPUT_BYTES = 512 * 1024 * 1024  # copied into each call's job directory
_TRACEBACK_LINES = 12


def no_sandbox(tool_name: str) -> str:
    return (f"'{tool_name}' runs only in the sandbox, and this worker has none. "
            "Tell the user that running code is not available right now.")


def run_for_call(tool_name: str, code: str, context: ToolContext, *,
                 args: Mapping[str, Any] | None = None) -> SandboxOutcome:
    """Run ``code`` with the conversation's files; the returned files are
    saved to the conversation before this returns. Raises ``ToolError``
    with the model's guidance when the code failed or was stopped."""
    if context.sandbox is None:
        raise ToolError(no_sandbox(tool_name))
    inputs = _inputs(context.files)
    outcome = context.sandbox.run_python(code, inputs=inputs, args=args)
    with outcome:
        failure = _failure(outcome, context)
        not_saved = _save_returned(outcome, context.files) if failure is None else []
        outcome.notes = _notes(outcome, not_saved)
    if failure is not None:
        raise ToolError(failure)
    return outcome


def python_result(outcome: SandboxOutcome) -> str:
    """What the python tool returns: what the code printed, and any notes."""
    parts = []
    if outcome.stdout:
        parts.append(outcome.stdout.rstrip("\n"))
    if outcome.stderr.strip():
        parts.append("[stderr]\n" + outcome.stderr.rstrip("\n"))
    parts += outcome.notes
    if not parts:
        return (f"(The code ran and printed nothing. Print what you want to see, or save files to {OUTPUT_DIR} "
                "to return them.)")
    return "\n".join(parts)


def script_handler(tool_name: str, script: str) -> Callable[[dict[str, Any], ToolContext], Any]:
    """The handler of an admin's script tool: the script runs with the call's
    arguments as ``args``; what it prints is the result, as JSON when it is."""

    def handle(arguments: dict[str, Any], context: ToolContext) -> Any:
        outcome = run_for_call(tool_name, script, context, args=arguments)
        printed = outcome.stdout.strip()
        try:
            value: Any = json.loads(printed) if printed else None
        except ValueError:
            return python_result(outcome)
        return value if not outcome.notes else {"result": value, "notes": outcome.notes}

    return handle


def _inputs(files: FileAccess | None) -> list[InputFile]:
    """The conversation's files under unique names, up to the limits."""
    if files is None:
        return []
    chosen: list[InputFile] = []
    taken: set[str] = set()
    total = 0
    for info in files.list():
        if len(chosen) >= MAX_INPUT_FILES or total + info.size > MAX_INPUT_BYTES:
            break
        name = _unique(_plain(info.name), taken)
        chosen.append(InputFile(name=name, open=_opener(files, info)))
        total += info.size
    return chosen


def _opener(files: FileAccess, info: FileInfo):
    return lambda: files.open_bytes(info.id)


def _plain(name: str) -> str:
    base = posixpath.basename(name.replace("\\", "/")).strip() or "file"
    return base if base not in (".", "..") else "file"


def _unique(name: str, taken: set[str]) -> str:
    stem, dot, ext = name.rpartition(".")
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem} ({n}).{ext}" if dot and stem else f"{name} ({n})"
    taken.add(candidate)
    return candidate


def _save_returned(outcome: SandboxOutcome, files: FileAccess | None) -> list[tuple[str, str]]:
    """Save what the code returned; the files that could not be, and why."""
    if not outcome.returned.files:
        return []
    if files is None:
        return [(item.name, "this call belongs to no conversation") for item in outcome.returned.files]
    not_saved = []
    for item in outcome.returned.files:
        try:
            with open(item.path, "rb") as data:
                files.save(item.name.replace("/", "_"), data, content_type=_text_hint(item.name))
        except ToolError as exc:
            not_saved.append((item.name, str(exc)))
    return not_saved


def _text_hint(name: str) -> str | None:
    ext = os.path.splitext(name)[1].lower()
    return {".csv": "text/csv", ".md": "text/markdown", ".json": "application/json"}.get(ext)


def _notes(outcome: SandboxOutcome, not_saved: list[tuple[str, str]]) -> list[str]:
    skipped = list(outcome.returned.skipped) + not_saved
    if not skipped:
        return []
    listed = "; ".join(f"{name} ({why})" for name, why in skipped[:20])
    return [f"[Not returned from {OUTPUT_DIR}: {listed}]"]


def _failure(outcome: SandboxOutcome, context: ToolContext) -> str | None:
    """The model's text for a run that did not end well; None when it did."""
    assert context.sandbox is not None
    limits, wall_s = context.sandbox.limits, context.sandbox.wall_s
    if outcome.setup_error:
        return f"the sandbox could not be started ({outcome.setup_error}). Tell the user running code failed."
    what: str | None = None
    if outcome.stopped == "timeout":
        what = (f"the code ran longer than {wall_s:g} s and was stopped, with every process it started. "
                "Make it faster, work on less data, or split the work over several calls "
                f"(files saved in {OUTPUT_DIR} are returned; those in {INPUT_DIR} are there each time).")
    elif outcome.stopped == "cancelled":
        what = "the run was cancelled, and the code was stopped."
    elif outcome.stopped == "output_limit":
        what = (f"the code printed more than {limits.max_output_kb} KiB and was stopped. Print a summary "
                "(len(), df.head(), df.describe()) rather than whole data.")
    elif outcome.signal == signal.SIGXCPU:
        what = f"the code used up its {limits.cpu_s} s of CPU time and was stopped."
    elif outcome.signal == signal.SIGKILL:
        what = "the code was killed (it may have run out of memory)."
    elif outcome.signal is not None:
        what = f"the code was ended by signal {signal.Signals(outcome.signal).name}."
    elif outcome.exit_code not in (0, None):
        what = _error_text(outcome, limits)
    if what is None:
        return None
    printed = outcome.stdout.strip()
    if printed and outcome.stopped != "output_limit":
        what += "\n[stdout before it ended]\n" + printed[-4000:]
    return what


def _error_text(outcome: SandboxOutcome, limits: SandboxLimits) -> str:
    lines = outcome.stderr.rstrip("\n").splitlines()
    if lines and lines[0].startswith("Traceback"):
        last = lines[-1]
        tail = "\n".join(lines[-_TRACEBACK_LINES:])
        text = f"the code raised {last.split(':', 1)[0]}. The traceback's last lines:\n{tail}"
        if last.startswith("MemoryError"):
            text += f"\nEach process may use {limits.memory_mb} MiB: work on less data at once."
        elif last.startswith(("FileNotFoundError", "PermissionError", "OSError")):
            text += (f"\nThe conversation's files are in {INPUT_DIR} (read-only); write to {OUTPUT_DIR} "
                     "(the working directory) or /tmp. There is no network.")
        return text + "\nFix the code and call again."
    tail = "\n".join(lines[-_TRACEBACK_LINES:])
    return f"the code exited with status {outcome.exit_code}." + (f"\n[stderr]\n{tail}" if tail else "")
