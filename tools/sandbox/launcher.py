"""The first program inside a sandbox: it sets the limits, runs the code in
a child process, and hands the files the code left in the output directory
back to the runner.

It runs under the sandbox's own Python (docs/sandbox.md), so it uses the
standard library only and imports nothing of ChatForge. The runner copies it
into each call's job directory; it is not imported by the project.

Why a child process: the code must not reach the pipe the files go back on
(``files_fd`` in the job), so it runs in a fork that closes it first; and the limit on
processes (RLIMIT_NPROC) can only be set from inside, where it counts this
sandbox's processes alone (the sandbox is its own user namespace).

The job (``/sandbox/job.json``) says what to run and under which limits.
Exit status: the code's, or 128 + the signal that ended it.
"""

import ast
import builtins
import json
import linecache
import os
import resource
import shutil
import sys
import tarfile
import traceback

JOB = "/sandbox/job.json"
CODE = "/sandbox/main.py"
MANIFEST = ".chatforge-manifest.json"  # the first member of the tar: what was left out
MAX_RETURNED = 50  # files looked at in the output directory; more are named as skipped


def main() -> int:
    with open(JOB, encoding="utf-8") as job_file:
        job = json.load(job_file)
    for source, target in job.get("seed", []):
        if os.path.isdir(source):  # a writable copy of a read-only cache (matplotlib's fonts)
            shutil.copytree(source, target, dirs_exist_ok=True)
    _limit(job["limits"])
    child = os.fork()
    if child == 0:
        os.close(job["files_fd"])
        _run_code(job)  # never returns
    status = _wait(child)
    _send_files_back(job["output_dir"], job["files_fd"])
    return status


def _limit(limits: dict) -> None:
    """Hard limits the code cannot raise again. The CPU limit's hard value
    is a second above the soft one: at the soft one the kernel sends
    SIGXCPU, which says why the code ended; at the hard one, SIGKILL."""
    mib = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    for which, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mib),
        (resource.RLIMIT_NPROC, limits["max_processes"]),
        (resource.RLIMIT_NOFILE, limits["max_open_files"]),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * mib),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(which, (value, value))


def _run_code(job: dict) -> None:
    """Run the code as ``__main__`` in the output directory. As in a
    notebook, a last line that is an expression has its value printed."""
    status = 0
    try:
        os.chdir(job["output_dir"])
        sys.argv = ["main.py"]
        with open(CODE, encoding="utf-8") as code_file:
            source = code_file.read()
        scope = {"__name__": "__main__", "__file__": "main.py", "__builtins__": builtins}
        if "args" in job:
            scope["args"] = job["args"]
        # So that tracebacks quote the code's lines.
        linecache.cache["main.py"] = (len(source), None, source.splitlines(True), "main.py")
        tree = ast.parse(source, "main.py")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "main.py", "exec"), scope)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "main.py", "eval"), scope)
            if value is not None:
                print(repr(value))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException as exc:  # the code's failure, whatever it is, is the model's to read
        _print_traceback(exc)
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _print_traceback(exc: BaseException) -> None:
    """The traceback without this launcher's own frames."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [frame for frame in frames if frame.filename != __file__]
    print("Traceback (most recent call last):", file=sys.stderr)
    print("".join(traceback.format_list(kept)), end="", file=sys.stderr)
    print("".join(traceback.format_exception_only(type(exc), exc)), end="", file=sys.stderr)


def _wait(child: int) -> int:
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except ChildProcessError:
            return 1
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)


def _send_files_back(output_dir: str, files_fd: int) -> None:
    """The regular files under the output directory, as a tar stream on ``files_fd``.
    Links and special files are named in the manifest, never followed. The
    runner trusts none of it: it checks every member again."""
    skipped: list[dict] = []
    found: list[tuple[str, str]] = []
    for root, dirs, names in os.walk(output_dir, followlinks=False):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, output_dir)
            if os.path.islink(path):
                skipped.append({"name": relative, "reason": "a symbolic link"})
            elif not os.path.isfile(path):
                skipped.append({"name": relative, "reason": "not a regular file"})
            elif len(found) >= MAX_RETURNED:
                skipped.append({"name": relative, "reason": f"more than {MAX_RETURNED} files"})
            else:
                found.append((path, relative))
    try:
        with os.fdopen(files_fd, "wb") as pipe, tarfile.open(fileobj=pipe, mode="w|") as tar:
            manifest = json.dumps({"skipped": skipped}).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(manifest)
            tar.addfile(info, _Bytes(manifest))
            for path, relative in found:
                try:
                    with open(path, "rb", opener=_no_follow) as handle:
                        info = tarfile.TarInfo(relative)
                        info.size = os.fstat(handle.fileno()).st_size
                        tar.addfile(info, handle)
                except OSError:
                    continue
    except (BrokenPipeError, OSError):
        pass  # the runner stopped reading: it has all it will take


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        chunk, self._at = self._data[self._at:end], min(end, len(self._data))
        return chunk


if __name__ == "__main__":
    sys.exit(main())
