"""A private Postgres database for a whole stack, and who holds its connections.

``stack_database`` makes a login role (optionally with a CONNECTION LIMIT)
owning a fresh database on a private cluster, migrates it and creates the
demo user, so a test can start a distributed stack on it and stop the
cluster under it. ``ConnectionSampler`` watches ``pg_stat_activity`` from
the superuser's own connection and attributes each of the role's backends to
the stack process that holds the client end of its socket (read from /proc),
so a test sees how many connections each process held at most.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from .private_services import PrivatePostgres
from .stack import ROOT, TEST_SECRET_KEYS, Process, base_env

DATABASE = "chatforge"


def stack_database(pg: PrivatePostgres, *, role: str, connection_limit: int | None, redis_url: str) -> tuple[str, str]:
    """Create ``role`` and its database, migrate it, make the demo user:
    ``(database_url, api_token)``."""
    limit = f" CONNECTION LIMIT {connection_limit}" if connection_limit is not None else ""
    pg.execute(f"CREATE ROLE {role} LOGIN{limit}")
    pg.execute(f"CREATE DATABASE {DATABASE} OWNER {role}")
    url = pg.url(DATABASE, user=role)
    env = base_env(DATABASE_URL=url, REDIS_URL=redis_url, DJANGO_SECRET_KEY="db-observer-secret-key-0123456789-abcdefgh",
                   CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS, CHATFORGE_LOG_LEVEL="WARNING")
    for args in (["migrate", "-v", "0"], ["create_demo_user", "--token-only"]):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True, timeout=180)
    return url, done.stdout.strip()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def process_tree(pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(_children(current))
    return tree


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if match := re.fullmatch(r"socket:\[(\d+)\]", target):
                inodes.add(match[1])
    except OSError:
        pass
    return inodes


def _local_ports_by_inode() -> dict[str, int]:
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            ports[parts[9]] = int(parts[1].rsplit(":", 1)[1], 16)
    return ports


@dataclass
class ConnectionSampler:
    """Samples the role's backends every ``interval_s`` until stopped."""

    pg: PrivatePostgres
    role: str
    processes: list[Process]
    interval_s: float = 0.1
    samples: int = 0
    max_total: int = 0
    max_by_process: Counter = field(default_factory=Counter)
    unattributed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _pids_by_port(self) -> dict[int, str]:
        ports = _local_ports_by_inode()
        owners: dict[int, str] = {}
        for proc in self.processes:
            for pid in process_tree(proc.popen.pid):
                name = proc.name if pid == proc.popen.pid else f"{proc.name}:child-{pid}"
                for inode in _socket_inodes(pid):
                    if inode in ports:
                        owners[ports[inode]] = name
        return owners

    def sample_once(self, conn: psycopg.Connection) -> Counter:
        rows = conn.execute("SELECT client_port FROM pg_stat_activity WHERE usename = %s", [self.role]).fetchall()
        owners = self._pids_by_port()
        held = Counter(owners.get(port, "?") for (port,) in rows)
        return held

    def _loop(self) -> None:
        with psycopg.connect(self.pg.url(), autocommit=True) as conn:
            while not self._stop.is_set():
                try:
                    held = self.sample_once(conn)
                except psycopg.Error:
                    break  # the cluster was stopped under us
                self.samples += 1
                self.max_total = max(self.max_total, sum(held.values()))
                self.unattributed = max(self.unattributed, held.pop("?", 0))
                for name, count in held.items():
                    self.max_by_process[name] = max(self.max_by_process[name], count)
                time.sleep(self.interval_s)

    def start(self) -> ConnectionSampler:
        self._thread = threading.Thread(target=self._loop, name="pg-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
