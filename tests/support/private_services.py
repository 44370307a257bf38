"""Private Postgres and Redis servers for outage tests.

Outage tests stop, kill and restart their database or broker. They must
never do that to the machine's shared services, so each starts its own:
``redis-server`` on a free port, and a Postgres cluster made with ``initdb``
and run with ``pg_ctl``, both under a temporary directory that is removed
afterwards. Postgres refuses to run as root, so when the tests run as root
the cluster is created and run as the ``postgres`` system user.

Both listen on 127.0.0.1 unless told otherwise: a multi-host test gives them
the address of its database host, a ``command_prefix`` that runs them on that
host (``ip netns exec <namespace>``, tests/support/netns.py) and, for
Postgres, the network its clients connect from.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg
import redis

from .stack import free_port


def _wait(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


class PrivateRedis:
    """A ``redis-server`` of our own (no persistence) on a free port, on
    ``host`` (started with ``command_prefix`` before its command)."""

    def __init__(self, *, host: str = "127.0.0.1", command_prefix: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.host = host
        self.command_prefix = list(command_prefix)
        self.dir = Path(tempfile.mkdtemp(prefix="chatforge-redis-"))
        self.popen: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://{self.host}:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), socket_timeout=5)

    def _up(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def start(self) -> PrivateRedis:
        """Start (again, on the same port) with an empty dataset."""
        log = open(self.dir / "redis.log", "a")  # noqa: SIM115 - the server owns it
        # Off the loopback, clients from other hosts must be let in.
        remote = [] if self.host == "127.0.0.1" else ["--protected-mode", "no"]
        self.popen = subprocess.Popen(
            [*self.command_prefix, "redis-server", "--bind", self.host, "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), *remote],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        _wait(self._up, timeout=20, what=f"redis-server on port {self.port}")
        return self

    def kill(self) -> None:
        """SIGKILL: connections drop, everything held in memory is gone."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} was not found (install the postgresql package).")
    return found


class PrivatePostgres:
    """A Postgres cluster of our own on a free port, under a temporary directory.

    ``host``: the address it listens on; ``trust_network``: a CIDR whose
    clients are let in without a password (besides the loopback's);
    ``command_prefix``: put before every server command (``initdb``,
    ``pg_ctl``), e.g. to run the cluster in a network namespace."""

    def __init__(self, *, max_connections: int = 100, host: str = "127.0.0.1", trust_network: str | None = None,
                 command_prefix: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.host = host
        self.trust_network = trust_network
        self.command_prefix = list(command_prefix)
        self.dir = Path(tempfile.mkdtemp(prefix="chatforge-pg-"))
        self.data = self.dir / "data"
        self.max_connections = max_connections
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)

    def url(self, db: str = "postgres", user: str = "postgres") -> str:
        return f"postgres://{user}@{self.host}:{self.port}/{db}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = list(args)
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        command = [*self.command_prefix, *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def _up(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def init(self) -> PrivatePostgres:
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = '{self.host}'\nunix_socket_directories = '{self.dir}'\n"
                f"max_connections = {self.max_connections}\nfsync = off\nsynchronous_commit = off\n"
                "full_page_writes = off\n"
            )
        if self.trust_network:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"\nhost all all {self.trust_network} trust\n")
        return self

    def start(self) -> PrivatePostgres:
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "start")
        _wait(self._up, timeout=30, what=f"Postgres on port {self.port}")
        return self

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends every session (clients see their connections drop);
        ``immediate`` is a crash without a clean shutdown."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def execute(self, sql: str, db: str = "postgres") -> None:
        with psycopg.connect(self.url(db), autocommit=True) as conn:
            conn.execute(sql)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def private_postgres(*, max_connections: int = 100) -> Iterator[PrivatePostgres]:
    server = PrivatePostgres(max_connections=max_connections).init().start()
    try:
        yield server
    finally:
        server.destroy()
