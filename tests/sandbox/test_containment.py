"""What code in the sandbox cannot do (docs/sandbox.md, "Threat model"),
each tried for real from inside a bubblewrap sandbox.

Every test runs the attempt through the real runner and then checks, from
the host, that the attempt failed and that no process of the sandbox is
left. Each attempt is written so that it would succeed — and the test
fail — without the sandbox: the same code run by the host's Python
reaches the canary, reads the secret and finds the checkout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from tests.support.sandbox import processes_of, sandbox_config
from tools.sandbox.runner import SandboxOutcome, run_sandboxed
from tools.sandbox_limits import SandboxLimits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMITS = SandboxLimits(cpu_s=5, memory_mb=512, max_processes=16, max_open_files=64, max_file_mb=8, work_mb=32,
                       max_output_kb=256)


@pytest.fixture(scope="module")
def config():
    return sandbox_config()


def run(config, code: str, *, limits: SandboxLimits = LIMITS, wall_s: float = 30, **kwargs) -> SandboxOutcome:
    outcome = run_sandboxed(config, textwrap.dedent(code), limits=limits, wall_s=wall_s, **kwargs)
    outcome.close()
    assert processes_of(config) == [], "a process of the sandbox outlived it"
    return outcome


def run_unsandboxed(code: str) -> str:
    """The same attempt by the host's Python: proves the attempt can succeed."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=30, check=False).stdout


class Canary:
    """A listener on the host's loopback that counts who connects."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


CONNECT = """
import socket
for port in {ports}:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        print("connected", port)
    except OSError as exc:
        print("refused", port, type(exc).__name__)
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    print("connected outside")
except OSError as exc:
    print("outside", type(exc).__name__)
"""


def test_no_connection_reaches_the_host_loopback_or_the_outside(config) -> None:
    canary = Canary()
    try:
        ports = [canary.port, 5432, 6379]
        assert f"connected {canary.port}" in run_unsandboxed(CONNECT.format(ports=ports))
        before = canary.connections
        outcome = run(config, CONNECT.format(ports=ports))
        assert outcome.exit_code == 0, outcome.stderr
        assert "connected" not in outcome.stdout
        assert outcome.stdout.count("refused") == 3
        assert "outside OSError" in outcome.stdout or "outside" in outcome.stdout
        assert canary.connections == before  # none arrived from the sandbox
    finally:
        canary.close()


def test_the_workers_environment_and_secrets_are_not_there(config, monkeypatch) -> None:
    monkeypatch.setenv("CHATFORGE_CANARY_SECRET", "s3cr3t-canary-value")
    code = """
    import os
    print(dict(os.environ))
    for path in ("/proc/1/environ", "/proc/self/environ", "/proc/%d/environ" % {pid}):
        try:
            print(path, open(path, "rb").read())
        except OSError as exc:
            print(path, type(exc).__name__)
    """.format(pid=os.getpid())
    assert "s3cr3t-canary-value" in run_unsandboxed(code)
    outcome = run(config, code)
    assert outcome.exit_code == 0, outcome.stderr
    assert "s3cr3t-canary-value" not in outcome.stdout
    assert "DATABASE_URL" not in outcome.stdout and "DJANGO_SECRET_KEY" not in outcome.stdout
    assert f"/proc/{os.getpid()}/environ FileNotFoundError" in outcome.stdout  # the host's processes are not seen


# The checkout's own files (the sandbox's Python environment is mounted at
# its own path, which may lie inside the checkout: that directory alone is seen).
SENSITIVE = [os.path.join(ROOT, "manage.py"), os.path.join(ROOT, ".git"), os.path.join(ROOT, ".venv"),
             os.path.join(ROOT, "chatforge", "settings"), "/etc/shadow", "/root", "/home",
             "/var/run/secrets/kubernetes.io/serviceaccount/token", "/.dockerenv", "/run/secrets",
             "/proc/1/root/etc/shadow", "/sys/kernel", "/var/lib/postgresql"]


def test_the_host_files_are_not_there(config) -> None:
    code = f"""
    import os
    for path in {SENSITIVE!r}:
        print(path, "exists" if os.path.exists(path) else "absent")
    """
    outcome = run(config, code)
    assert outcome.exit_code == 0, outcome.stderr
    assert f"{ROOT}/manage.py exists" in run_unsandboxed(code)  # the same check sees the checkout outside
    for path in SENSITIVE:
        assert f"{path} absent" in outcome.stdout, outcome.stdout


def test_nothing_outside_the_working_directories_can_be_written(config) -> None:
    code = """
    import os
    for path in ("/usr/x", "/etc/x", "/mnt/data/x", "/x", "/sandbox/x", "/proc/x", "/mnt/output/ok", "/tmp/ok"):
        try:
            open(path, "w").write("x")
            print(path, "written")
        except OSError as exc:
            print(path, type(exc).__name__)
    """
    outcome = run(config, code)
    assert outcome.exit_code == 0, outcome.stderr
    for path in ("/usr/x", "/etc/x", "/mnt/data/x", "/x", "/sandbox/x", "/proc/x"):
        assert f"{path} written" not in outcome.stdout
    assert "/mnt/output/ok written" in outcome.stdout and "/tmp/ok written" in outcome.stdout


def test_a_fork_bomb_is_contained(config) -> None:
    outcome = run(config, """
    import os
    children = 0
    try:
        while True:
            if os.fork() == 0:
                import time; time.sleep(60); os._exit(0)
            children += 1
    except OSError as exc:
        print("stopped after", children, type(exc).__name__)
    """, wall_s=20)
    assert "stopped after" in outcome.stdout, outcome.stderr
    children = int(outcome.stdout.split()[2])
    assert children < LIMITS.max_processes
    assert outcome.stopped is None  # the bomb failed; the code ended by itself


def test_a_thread_bomb_is_contained(config) -> None:
    outcome = run(config, """
    import threading, time
    started = 0
    try:
        while True:
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
            started += 1
    except RuntimeError as exc:
        print("stopped after", started, exc, flush=True)
    import os; os._exit(0)
    """, wall_s=20)
    assert "stopped after" in outcome.stdout, outcome.stderr
    assert int(outcome.stdout.split()[2]) < LIMITS.max_processes


def test_a_memory_bomb_fails_with_memory_error(config) -> None:
    outcome = run(config, "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))\n")
    assert outcome.exit_code == 1
    assert "MemoryError" in outcome.stderr


def test_a_busy_loop_is_stopped_by_its_cpu_limit(config) -> None:
    limits = SandboxLimits(**{**LIMITS.as_dict(), "cpu_s": 1})
    outcome = run(config, "while True:\n    pass\n", limits=limits, wall_s=60)
    assert outcome.stopped is None
    assert outcome.signal == 24  # SIGXCPU


def test_a_huge_file_stops_at_the_file_size_limit(config) -> None:
    outcome = run(config, """
    written = 0
    try:
        with open("big.bin", "wb") as f:
            while written < 10 * 1024 ** 3:
                f.write(b"x" * (1024 * 1024))
                written += 1024 * 1024
    except OSError as exc:
        print("stopped at", written // (1024 * 1024), "MiB:", exc)
    """)
    assert "stopped at" in outcome.stdout, outcome.stderr
    assert int(outcome.stdout.split()[2]) <= LIMITS.max_file_mb


def test_a_flood_of_output_stops_the_run(config) -> None:
    outcome = run(config, """
    import sys
    for _ in range(1024):
        sys.stdout.write("x" * (1024 * 1024))
    """)
    assert outcome.stopped == "output_limit"
    assert outcome.stdout_bytes + outcome.stderr_bytes < 1024 ** 3
    assert "bytes of output left out" in outcome.stdout


def test_a_detached_grandchild_dies_with_the_sandbox(config) -> None:
    outcome = run(config, """
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "600"])
        os._exit(0)
    time.sleep(0.2)
    print("parent leaves")
    """)
    assert "parent leaves" in outcome.stdout  # and run() found no process left


def test_a_sandbox_stopped_at_its_wall_time_takes_every_process_with_it(config) -> None:
    outcome = run(config, """
    import os, subprocess, time
    for _ in range(3):
        subprocess.Popen(["/bin/sleep", "600"], start_new_session=True)
    time.sleep(600)
    """, wall_s=2)
    assert outcome.stopped == "timeout"


def test_a_cancelled_run_stops_its_sandbox(config) -> None:
    asked = threading.Event()

    def cancelled() -> bool:
        asked.set()
        return True

    outcome = run(config, "import time\ntime.sleep(600)\n", cancel_check=cancelled)
    assert asked.is_set()
    assert outcome.stopped == "cancelled"


def test_ptrace_mount_unshare_and_raw_sockets_are_refused(config) -> None:
    code = """
    import ctypes, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    def attempt(name, result):
        print(name, "refused" if result != 0 else "allowed", os.strerror(ctypes.get_errno()))
    attempt("ptrace", libc.ptrace(16, {pid}, 0, 0))  # PTRACE_ATTACH to the host's test process
    os.makedirs("/tmp/m", exist_ok=True)
    attempt("mount", libc.mount(b"none", b"/tmp/m", b"tmpfs", 0, None))
    attempt("unshare-user", libc.unshare(0x10000000))  # CLONE_NEWUSER
    attempt("unshare-net", libc.unshare(0x40000000))  # CLONE_NEWNET
    for family, kind, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP), (socket.AF_PACKET, socket.SOCK_RAW, 0)):
        try:
            socket.socket(family, kind, proto).close()
            print("raw", family, "allowed")
        except OSError as exc:
            print("raw", family, "refused", type(exc).__name__)
    """.format(pid=os.getpid())
    outcome = run(config, code)
    assert outcome.exit_code == 0, outcome.stderr
    for name in ("ptrace", "mount", "unshare-user", "unshare-net"):
        assert f"{name} refused" in outcome.stdout, outcome.stdout
    assert "allowed" not in outcome.stdout
    assert outcome.stdout.count("refused PermissionError") == 2


def test_links_and_special_files_in_the_output_are_not_returned(config) -> None:
    outcome = run_sandboxed(config, textwrap.dedent("""
    import os
    open("plain.txt", "w").write("kept")
    os.symlink("/etc/passwd", "passwd-link")
    os.symlink("/mnt/data", "data-dir")
    os.mkfifo("pipe")
    os.makedirs("sub", exist_ok=True)
    open("sub/inner.csv", "w").write("a,b\\n1,2\\n")
    """), limits=LIMITS, wall_s=30)
    with outcome:
        names = {item.name: item for item in outcome.returned.files}
        assert set(names) == {"plain.txt", "sub/inner.csv"}
        assert open(names["plain.txt"].path).read() == "kept"
        skipped = dict(outcome.returned.skipped)
        assert skipped["passwd-link"] == "a symbolic link"
        assert skipped["data-dir"] == "a symbolic link"
        assert skipped["pipe"] == "not a regular file"
    assert processes_of(config) == []
