"""Real ChatForge processes for integration tests and benchmarks: Celery
workers (an LLM worker on gevent, a tools worker on prefork and an I/O tools
worker on threads, as in production) and a uvicorn ASGI server, each a
subprocess with its own environment, started and stopped cleanly. A
``prefix`` runs a process on another host (``ip netns exec <namespace>``,
tests/support/netns.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
# Fernet key for the processes tests start (tests only).
TEST_SECRET_KEYS = "uCKE6r66a2mBYRW6KXsq-jfMAByMIpJczrLdXosbxPo="


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole process group: no warm shutdown, no acks, no cleanup."""
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)


def start_process(name: str, args: list[str], env: dict[str, str], log_dir: Path,
                  prefix: Sequence[str] = ()) -> Process:
    log_path = log_dir / f"{name}.log"
    log_file = open(log_path, "w")  # noqa: SIM115 - the child owns it
    popen = subprocess.Popen(
        [*prefix, *args], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
    )
    return Process(name, popen, log_path)


def wait_for(predicate, *, timeout: float, what: str, process: Process | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.popen.poll() is not None:
            raise RuntimeError(f"{process.name} exited while waiting for {what}:\n{process.log()[-4000:]}")
        if predicate():
            return
        time.sleep(0.1)
    tail = process.log()[-4000:] if process else ""
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{tail}")


def start_worker(name: str, *, queues: str, pool: str, concurrency: int, env: dict[str, str], log_dir: Path,
                 node: str | None = None, prefix: Sequence[str] = ()) -> Process:
    """``node``: the Celery node name (``-n``), ``{name}@%h`` by default."""
    proc = launch_worker(name, queues=queues, pool=pool, concurrency=concurrency, env=env, log_dir=log_dir,
                         node=node, prefix=prefix)
    wait_for_worker(proc)
    return proc


def launch_worker(name: str, *, queues: str, pool: str, concurrency: int, env: dict[str, str], log_dir: Path,
                  node: str | None = None, prefix: Sequence[str] = ()) -> Process:
    """A worker started but not yet waited for (``wait_for_worker``): a
    stack's workers start side by side."""
    args = [
        sys.executable, "-m", "celery", "-A", "chatforge", "worker",
        "-Q", queues, "-P", pool, "-c", str(concurrency), "-n", node or f"{name}@%h",
        # -E as deployed (Procfile, compose, Kubernetes): task events for Flower.
        "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO", "-E",
    ]
    return start_process(name, args, env, log_dir, prefix)


def wait_for_worker(proc: Process) -> None:
    wait_for(lambda: " ready." in proc.log(), timeout=60, what=f"worker {proc.name}", process=proc)


def start_beat(*, env: dict[str, str], log_dir: Path, prefix: Sequence[str] = ()) -> Process:
    args = [sys.executable, "-m", "celery", "-A", "chatforge", "beat", "-l", "INFO",
            "-s", str(log_dir / "beat-schedule")]
    proc = start_process("beat", args, env, log_dir, prefix)
    wait_for(lambda: "beat: Starting" in proc.log(), timeout=60, what="celery beat", process=proc)
    return proc


def start_server(*, port: int, env: dict[str, str], log_dir: Path, name: str = "server", workers: int = 1,
                 host: str = "127.0.0.1", prefix: Sequence[str] = ()) -> Process:
    args = [sys.executable, "manage.py", "serve", "--host", host, "--port", str(port), "--workers", str(workers)]
    proc = start_process(name, args, env, log_dir, prefix)

    def healthy() -> bool:
        try:
            return httpx.get(f"http://{host}:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, timeout=60, what="the ASGI server", process=proc)
    return proc


def base_env(**overrides: str) -> dict[str, str]:
    """The parent's environment without settings a test must choose itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CHATFORGE_", "DJANGO_", "OPENAI_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["DJANGO_SETTINGS_MODULE"] = "chatforge.settings"
    env.update(overrides)
    return env


@dataclass
class EmbeddedServer:
    url: str  # http://127.0.0.1:<port>
    token: str  # the demo user's API token
    env: dict[str, str]
    workdir: Path  # its SQLite database and log
    process: Process


@contextmanager
def embedded_server(*, prefix: str, **env_overrides: str) -> Iterator[EmbeddedServer]:
    """``make run``'s process on a free port: embedded mode with a SQLite
    database of its own, migrated, and the demo user (demo / demo) with a
    token."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    env = base_env(CHATFORGE_SQLITE_PATH=str(workdir / "db.sqlite3"), CHATFORGE_FILES_DIR=str(workdir / "files"),
                   **env_overrides)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    token = subprocess.run([*manage, "create_demo_user", "--token-only"], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    port = free_port()
    process = start_server(port=port, env=env, log_dir=workdir)
    try:
        yield EmbeddedServer(url=f"http://127.0.0.1:{port}", token=token, env=env, workdir=workdir, process=process)
    finally:
        process.stop()


@dataclass
class DistributedStack:
    http_url: str
    ws_url: str
    env: dict[str, str]
    log_dir: Path
    processes: list[Process] = field(default_factory=list)

    def process(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)

    def logs(self) -> str:
        return "\n".join(f"===== {p.name}\n{p.log()[-3000:]}" for p in self.processes)


# The I/O tools worker's threads (deploy/Procfile runs 16).
IO_TOOL_THREADS = 8


@contextmanager
def distributed_stack(
    *, database_url: str, redis_url: str, extra_env: dict[str, str] | None = None,
    llm_concurrency: int = 50, tool_concurrency: int = 4, with_beat: bool = False, llm_pool: str = "gevent",
) -> Iterator[DistributedStack]:
    """An LLM worker (gevent, as in production), a tools worker (prefork), an
    I/O tools worker (threads), one web process and, if asked, celery beat
    (which runs the stalled-run sweeper)."""
    log_dir = Path(tempfile.mkdtemp(prefix="chatforge-stack-"))
    env = base_env(
        **{
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "DJANGO_SECRET_KEY": "integration-tests-secret-key-0123456789-abcdefgh",
            "CHATFORGE_SECRET_KEYS": TEST_SECRET_KEYS,
            "CHATFORGE_LOG_LEVEL": "INFO",
            # The test process's files directory: web, workers and the test see the same bytes.
            "CHATFORGE_FILES_DIR": os.environ["CHATFORGE_FILES_DIR"],
            **(extra_env or {}),
        }
    )
    port = free_port()
    stack = DistributedStack(http_url=f"http://127.0.0.1:{port}", ws_url=f"ws://127.0.0.1:{port}", env=env, log_dir=log_dir)
    try:
        workers = [
            launch_worker("llm", queues="llm,default", pool=llm_pool, concurrency=llm_concurrency, env=env,
                          log_dir=log_dir),
            launch_worker("tools", queues="tools", pool="prefork", concurrency=tool_concurrency, env=env,
                          log_dir=log_dir),
            launch_worker("tools-io", queues="tools_io", pool="threads", concurrency=IO_TOOL_THREADS, env=env,
                          log_dir=log_dir),
        ]
        stack.processes.extend(workers)
        for worker in workers:
            wait_for_worker(worker)
        stack.processes.append(start_server(port=port, env=env, log_dir=log_dir))
        if with_beat:
            stack.processes.append(start_beat(env=env, log_dir=log_dir))
        yield stack
    finally:
        for proc in reversed(stack.processes):
            proc.stop()


# Fast leases and sweeps, for tests that kill workers or lose the broker:
# a dead step is seen as stalled within ~2 s and re-sent within ~0.5 s more.
FAST_RECOVERY_ENV = {
    "CHATFORGE_HEARTBEAT_S": "0.5",
    "CHATFORGE_RUN_STALL_S": "2",
    "CHATFORGE_SWEEP_INTERVAL_S": "0.5",
}


@contextmanager
def private_stack(*, database_url: str, redis_url: str, llm_base_url: str,
                  extra_env: dict[str, str] | None = None,
                  fast_recovery: bool = True) -> Iterator[DistributedStack]:
    """A stack of its own (with beat) on a Redis database of its own, which
    is emptied first: for tests that kill its processes or flush its Redis,
    which the shared stack must never see.

    ``fast_recovery`` takes a step for lost after 2 s without a heartbeat,
    so that tests of crashes and outages see recovery quickly. A test that
    counts deliveries turns it off: on a loaded machine a live step can miss
    2 s of heartbeats and be delivered again (harmlessly, but counted)."""
    import redis

    redis.Redis.from_url(redis_url).flushdb()  # before any worker binds its queues
    with distributed_stack(
        database_url=database_url,
        redis_url=redis_url,
        with_beat=True,
        extra_env={
            "OPENAI_BASE_URL": llm_base_url,
            "OPENAI_API_KEY": "test-key",
            "CHATFORGE_TOOL_MODULES": "tests.support.tools",
            **(FAST_RECOVERY_ENV if fast_recovery else {}),
            **(extra_env or {}),
        },
    ) as stack:
        yield stack
