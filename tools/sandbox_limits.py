"""The hard limits one sandboxed call runs under (docs/sandbox.md, "Limits").

Plain data, so that a tool's policy, an admin row and the runner share one
definition. The wall time is not here: it is the tool's own timeout
(``ToolPolicy.timeout_s``), which the runner enforces a little before the
executor would, so that the model reads the sandbox's own message.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class SandboxLimits:
    """What one call may use. Each is enforced by the kernel (rlimits, a
    sized tmpfs) or by the runner (output), never by the code's good will."""

    cpu_s: int = 30  # CPU seconds per process (RLIMIT_CPU): a busy loop ends here
    memory_mb: int = 1024  # address space per process (RLIMIT_AS)
    max_processes: int = 32  # processes and threads in the sandbox (RLIMIT_NPROC, per sandbox)
    max_open_files: int = 256  # per process (RLIMIT_NOFILE)
    max_file_mb: int = 64  # the largest file it may write (RLIMIT_FSIZE)
    work_mb: int = 256  # the writable directories' size in all (tmpfs)
    max_output_kb: int = 1024  # stdout and stderr together; past it the run is stopped

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"sandbox limit {field.name} must be a positive whole number, got {value!r}")

    def as_dict(self) -> dict[str, int]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


LIMIT_HELP: dict[str, str] = {
    "cpu_s": "CPU seconds each process of the call may use.",
    "memory_mb": "Memory (address space) each process may map, in MiB.",
    "max_processes": "Processes and threads the call may have at once.",
    "max_open_files": "Files each process may have open.",
    "max_file_mb": "The largest file the call may write, in MiB.",
    "work_mb": "The call's writable space in all (working and output directories, /tmp), in MiB.",
    "max_output_kb": "What the call may print (stdout and stderr), in KiB; past it the call is stopped.",
}

# Their names for people (the admin's labels and columns).
LIMIT_LABEL: dict[str, str] = {
    "cpu_s": "CPU seconds",
    "memory_mb": "memory (MiB)",
    "max_processes": "processes",
    "max_open_files": "open files",
    "max_file_mb": "largest file (MiB)",
    "work_mb": "writable space (MiB)",
    "max_output_kb": "output (KiB)",
}
