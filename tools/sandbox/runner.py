"""Running code in a fresh sandbox and collecting what it printed and saved.

One call, one sandbox: a bubblewrap process (``command.py``) started in its
own session, watched from here for its wall time, the run's cancel and the
size of its output. Stopping it is one SIGKILL to bubblewrap; its
``--die-with-parent`` then takes the sandbox's first process, and with it
(the kernel ends a PID namespace with its first process) every process the
code started, double forks and new sessions included. A worker that dies
takes its sandboxes the same way.

What the code prints is kept up to a head and a tail; past
``max_output_kb`` in all the sandbox is stopped. The files it leaves in its
output directory come back over a pipe as a tar stream, spooled to the job
directory and checked member by member (``returned.py``).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal, Protocol

from tools.sandbox.capture import Capture
from tools.sandbox.command import OUTPUT_DIR, MPL_SEED, bwrap_argv
from tools.sandbox.config import SandboxConfig, hand_over, job_directory
from tools.sandbox_limits import SandboxLimits
from tools.sandbox.returned import ReturnedFiles, read_returned

_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
_KEEP_BYTES = 32 * 1024  # of each stream, at its start and again at its end
_CANCEL_EVERY_S = 0.5
_POLL_S = 0.1

Stopped = Literal["timeout", "cancelled", "output_limit"]


@dataclass(frozen=True)
class InputFile:
    """A file the code finds under /mnt/data, by ``name``."""

    name: str
    open: Callable[[], BinaryIO]


@dataclass
class SandboxOutcome:
    """How one sandboxed run ended. Use it as a context manager: the
    returned files' bytes stay on disk until the block ends."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stopped: Stopped | None = None  # stopped by the runner (else it ended by itself)
    setup_error: str = ""  # bubblewrap could not make the sandbox
    returned: ReturnedFiles = field(default_factory=ReturnedFiles)
    notes: list[str] = field(default_factory=list)  # for the model: what was not returned, and why
    _job_dir: str | None = field(default=None, repr=False)

    @property
    def signal(self) -> int | None:
        """The signal that ended the code (128 + n is how the launcher reports it)."""
        if self.exit_code is not None and self.exit_code > 128:
            return self.exit_code - 128
        return None

    def close(self) -> None:
        if self._job_dir is not None:
            shutil.rmtree(self._job_dir, ignore_errors=True)
            self._job_dir = None

    def __enter__(self) -> SandboxOutcome:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox(Protocol):
    """What a sandboxed tool's handler gets as ``context.sandbox``: runs
    Python under the tool's limits, its timeout and the run's cancel."""

    limits: SandboxLimits
    wall_s: float

    def run_python(self, code: str, *, inputs: Sequence[InputFile] = (),
                   args: Mapping[str, Any] | None = None) -> SandboxOutcome:
        ...


@dataclass(frozen=True)
class BwrapSandbox:
    """``Sandbox`` on this host's bubblewrap."""

    config: SandboxConfig
    limits: SandboxLimits
    wall_s: float
    cancel_check: Callable[[], bool] | None = None

    def run_python(self, code: str, *, inputs: Sequence[InputFile] = (),
                   args: Mapping[str, Any] | None = None) -> SandboxOutcome:
        return run_sandboxed(self.config, code, limits=self.limits, wall_s=self.wall_s, inputs=inputs,
                             args=args, cancel_check=self.cancel_check)


def run_sandboxed(
    config: SandboxConfig,
    code: str,
    *,
    limits: SandboxLimits,
    wall_s: float,
    inputs: Sequence[InputFile] = (),
    args: Mapping[str, Any] | None = None,
    cancel_check: Callable[[], bool] | None = None,
) -> SandboxOutcome:
    """Run ``code`` (Python) in a new sandbox and wait for it, at most
    ``wall_s`` seconds. ``args``: a JSON object the code reads as ``args``.
    Raises ``OSError`` only when bubblewrap cannot be started at all."""
    bwrap = config.bwrap_path()
    if bwrap is None:
        raise FileNotFoundError(f"bubblewrap ({config.bwrap}) is not installed")
    job_dir = job_directory(config)
    pipes = _Pipes()
    try:
        _write_job(config, job_dir, code, limits, inputs, args, files_fd=pipes.files_write)
        outcome = _watch(config, bwrap, job_dir, limits, wall_s, cancel_check, pipes)
    except BaseException:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise
    finally:
        pipes.close()
    outcome._job_dir = job_dir
    return outcome


class _Pipes:
    """The two pipes besides stdout and stderr: the returned files (the
    launcher's tar stream) and bubblewrap's info (the sandbox's first
    process, as the host sees it)."""

    def __init__(self) -> None:
        self.files_read, self.files_write = os.pipe()
        self.info_read, self.info_write = os.pipe()
        self._open = {self.files_read, self.files_write, self.info_read, self.info_write}

    def close_child_ends(self) -> None:
        for fd in (self.files_write, self.info_write):
            self._close(fd)

    def close(self) -> None:
        for fd in list(self._open):
            self._close(fd)

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)


def _write_job(config: SandboxConfig, job_dir: str, code: str, limits: SandboxLimits,
               inputs: Sequence[InputFile], args: Mapping[str, Any] | None, *, files_fd: int) -> None:
    uid = config.drops_to()
    uid, gid = (os.getuid(), os.getgid()) if uid is None else (uid, uid)
    job: dict[str, Any] = {
        "limits": limits.as_dict(),
        "files_fd": files_fd,  # the pipe the returned files go back on (its number in the sandbox too)
        "output_dir": OUTPUT_DIR,
        "seed": [[os.path.join(config.python_env_path, MPL_SEED), "/tmp/matplotlib"]],
    }
    if args is not None:
        job["args"] = dict(args)
    files = {
        "job.json": json.dumps(job),
        "main.py": code,
        "passwd": f"sandbox:x:{uid}:{gid}:sandbox:/tmp:/usr/sbin/nologin\n",
        "group": f"sandbox:x:{gid}:\n",
    }
    for name, text in files.items():
        path = os.path.join(job_dir, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        hand_over(config, path)
    launcher = os.path.join(job_dir, "launcher.py")
    shutil.copyfile(_LAUNCHER, launcher)
    hand_over(config, launcher)
    inputs_dir = os.path.join(job_dir, "inputs")
    os.mkdir(inputs_dir, 0o700)
    hand_over(config, inputs_dir)
    for item in inputs:
        path = os.path.join(inputs_dir, item.name)
        with item.open() as source, open(path, "wb") as target:
            shutil.copyfileobj(source, target, 1024 * 1024)
        hand_over(config, path)


def _watch(config: SandboxConfig, bwrap: str, job_dir: str, limits: SandboxLimits, wall_s: float,
           cancel_check: Callable[[], bool] | None, pipes: _Pipes) -> SandboxOutcome:
    """Start the sandbox and watch it until it has ended, every process of it."""
    started = time.monotonic()
    drop = config.drops_to()
    try:
        process = subprocess.Popen(  # noqa: S603 - our own argv, no shell
            bwrap_argv(config, bwrap, job_dir, limits, info_fd=pipes.info_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(pipes.files_write, pipes.info_write),
            env={"PATH": "/usr/bin:/bin"},  # bubblewrap's own: the worker's variables never reach it
            start_new_session=True,
            user=drop,
            group=drop,
            extra_groups=[] if drop is not None else None,
            cwd="/",
        )
    finally:
        pipes.close_child_ends()
    spool_path = os.path.join(job_dir, "returned.tar")
    streams = _Streams(Capture(_KEEP_BYTES), Capture(_KEEP_BYTES), pipes.files_read, pipes.info_read)
    try:
        with open(spool_path, "wb") as spool:
            stopped = _pump(process, streams, spool, limits, started + wall_s, cancel_check)
    finally:
        _end(process, streams)
    exit_code = process.returncode
    out, err = streams.stdout, streams.stderr
    setup_error = ""
    if exit_code not in (None, 0) and err.text().startswith("bwrap:") and streams.files_bytes == 0:
        setup_error = err.text().strip().splitlines()[0][len("bwrap:"):].strip()
    returned = (read_returned(spool_path, limits, job_dir, overflowed=streams.files_overflow)
                if stopped is None and not setup_error else ReturnedFiles())
    return SandboxOutcome(
        exit_code=exit_code,
        stdout=out.text(),
        stderr=err.text(),
        duration_ms=int((time.monotonic() - started) * 1000),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stopped=stopped,
        setup_error=setup_error,
        returned=returned,
    )


@dataclass
class _Streams:
    stdout: Capture
    stderr: Capture
    files_fd: int
    info_fd: int
    info: bytearray = field(default_factory=bytearray)
    files_bytes: int = 0
    files_overflow: bool = False

    def first_process(self) -> int | None:
        """The sandbox's first process (its PID namespace's init), once
        bubblewrap has said which."""
        try:
            return int(json.loads(bytes(self.info))["child-pid"])
        except (ValueError, KeyError, TypeError):
            return None


def _pump(process: subprocess.Popen, streams: _Streams, spool: BinaryIO, limits: SandboxLimits,
          deadline: float, cancel_check: Callable[[], bool] | None) -> Stopped | None:
    """Read the pipes until they close and the sandbox has exited, or until
    it must be stopped (then say why)."""
    assert process.stdout is not None and process.stderr is not None
    selector = selectors.DefaultSelector()
    captures = {process.stdout.fileno(): streams.stdout, process.stderr.fileno(): streams.stderr}
    for fd in (*captures, streams.files_fd, streams.info_fd):
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    output_cap = limits.max_output_kb * 1024
    files_cap = limits.work_mb * 1024 * 1024
    next_cancel_check = time.monotonic() + _CANCEL_EVERY_S
    try:
        while selector.get_map() or process.poll() is None:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if cancel_check is not None and now >= next_cancel_check:
                next_cancel_check = now + _CANCEL_EVERY_S
                if cancel_check():
                    return "cancelled"
            if not selector.get_map():
                # The pipes are closed: wait for the exit status, which comes at once.
                try:
                    process.wait(timeout=min(_POLL_S, max(0.0, deadline - now)))
                except subprocess.TimeoutExpired:
                    pass
                continue
            for key, _ in selector.select(min(_POLL_S, max(0.0, deadline - now))):
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(fd)
                    continue
                if fd == streams.info_fd:
                    streams.info += chunk[: 4096 - len(streams.info)]
                elif fd == streams.files_fd:
                    streams.files_bytes += len(chunk)
                    if streams.files_bytes <= files_cap:
                        spool.write(chunk)
                    else:
                        streams.files_overflow = True
                else:
                    captures[fd].add(chunk)
                    if streams.stdout.total + streams.stderr.total > output_cap:
                        return "output_limit"
        return None
    finally:
        selector.close()


def _end(process: subprocess.Popen, streams: _Streams) -> None:
    """Make sure the sandbox is gone, every process of it, and reap bubblewrap.

    SIGKILL to the sandbox's first process ends its PID namespace: the
    kernel kills every other process in it and waits for them before that
    first process is gone, and bubblewrap, its parent, then exits. Only
    when bubblewrap never said which process that is (it failed to set up)
    is bubblewrap's own session killed instead."""
    if process.poll() is None:
        first = streams.first_process()
        if first is not None and _parent_of(first) != process.pid:
            first = None  # not bubblewrap's child (it has gone): never signal another process
        try:
            if first is not None:
                os.kill(first, signal.SIGKILL)
            else:
                os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - bubblewrap exits once its child is gone
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
