"""Counting what the engine sends to Postgres and Redis, per process.

Postgres: a private cluster with ``pg_stat_statements`` preloaded, and one
login role per process of the stack (``bench_web`` for the web process that
takes the POSTs, ``bench_ws`` for the one serving the run sockets,
``bench_llm``, ``bench_tools``). ``pg_stat_statements`` keeps its counters
per role, so after a reset every statement a process sends is counted under
its own role: transaction control (``BEGIN``, ``COMMIT``, savepoints)
included, the empty query of a pool's connection check not (it is no
statement).

Redis: private ``redis-server`` processes. ``INFO stats`` gives the server's
``total_reads_processed`` (read events: one per request or pipeline a client
sends, i.e. its round trips) and ``INFO commandstats`` the commands, both
reset with ``CONFIG RESETSTAT``. To say which process sent what,
``redis-cli monitor`` writes every command with its client's address to a
file, and a sampler maps each client address to the process holding that
socket (from ``/proc``). Round trips per process are then counted from the
monitor lines: a ``MULTI`` … ``EXEC`` block is one, and commands a client
sent back to back within a few microseconds of each other (a pipeline
without ``MULTI``) are one; commands run by a Lua script are not round
trips. The sum is checked against the server's own read count.
"""

from __future__ import annotations

import math
import os
import re
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis

from bench.processes import children, process_tree
from tests.support.private_services import PrivatePostgres

ROLES = ("web", "ws", "llm", "tools")  # one Postgres login role per process: bench_<name>

PG_SETTINGS = (
    "\nshared_preload_libraries = 'pg_stat_statements'\n"
    "pg_stat_statements.track = top\n"
    "pg_stat_statements.track_utility = on\n"
    "pg_stat_statements.max = 10000\n"
    "log_connections = on\n"
)

# --------------------------------------------------------------------------
# Postgres
# --------------------------------------------------------------------------


@contextmanager
def counting_postgres(*, max_connections: int = 200, track_planning: bool = False) -> Iterator[PrivatePostgres]:
    """A private Postgres cluster with ``pg_stat_statements`` loaded;
    ``track_planning``: it also counts each statement's plans and their time."""
    server = PrivatePostgres(max_connections=max_connections).init()
    with open(server.data / "postgresql.conf", "a") as conf:
        conf.write(PG_SETTINGS)
        if track_planning:
            conf.write("pg_stat_statements.track_planning = on\n")
    try:
        server.start()
        yield server
    finally:
        server.destroy()


def prepare_counting(pg: PrivatePostgres, database: str) -> None:
    """The extension in ``database`` and a login role per process."""
    pg.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", db=database)
    for role in ROLES:
        pg.execute(f"CREATE ROLE bench_{role} LOGIN SUPERUSER")


def role_url(pg: PrivatePostgres, database: str, role: str) -> str:
    return pg.url(database, user=f"bench_{role}")


def statement_kind(query: str) -> str:
    """``transaction`` (BEGIN, COMMIT, ROLLBACK, savepoints), ``select``,
    ``insert``, ``update``, ``delete`` or ``other`` (SET, SHOW, …)."""
    word = query.lstrip().split(None, 1)[0].upper() if query.strip() else ""
    if word in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "START", "END"):
        return "transaction"
    if word == "WITH":  # a CTE: classify by what it does
        for kind in ("insert", "update", "delete"):
            if re.search(rf"\b{kind}\b", query, re.IGNORECASE):
                return kind
        return "select"
    if word in ("SELECT", "INSERT", "UPDATE", "DELETE"):
        return word.lower()
    return "other"


def statement_summary(query: str) -> str:
    """A short name for a normalized statement: its verb and table
    (``SELECT conversations_run``, ``UPDATE … RETURNING conversations_llmturn``),
    or the verb alone for transaction control and the like (savepoint names
    differ from one statement to the next)."""
    text = " ".join(query.split())
    kind = statement_kind(text)
    if kind in ("transaction", "other"):
        words = text.upper().split()
        if words[:2] in (["ROLLBACK", "TO"], ["RELEASE", "SAVEPOINT"]):
            return f"{words[0]} {words[1]}"
        return words[0] if words else "(empty)"
    pattern = {"select": r'\bFROM\s+"?(\w+)', "insert": r'\bINSERT\s+INTO\s+"?(\w+)',
               "update": r'\bUPDATE\s+"?(\w+)', "delete": r'\bDELETE\s+FROM\s+"?(\w+)'}[kind]
    match = re.search(pattern, text, re.IGNORECASE)
    table = match.group(1) if match else "?"
    prefix = f"{kind.upper()} … RETURNING" if text.upper().startswith("WITH") else kind.upper()
    return f"{prefix} {table}"


def summarize_queries(calls: Counter, per: int = 1) -> list[tuple[str, float]]:
    """Calls per ``statement_summary``, divided by ``per``, most first."""
    merged: Counter = Counter()
    for query, n in calls.items():
        merged[statement_summary(query)] += n
    return [(name, n / max(per, 1)) for name, n in merged.most_common()]


class Statements:
    """``pg_stat_statements`` of the benchmark's roles."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url

    def reset(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")

    def read(self) -> dict[str, Counter]:
        """Per process (role without ``bench_``): calls per normalized query."""
        found: dict[str, Counter] = {role: Counter() for role in ROLES}
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT r.rolname, s.query, s.calls FROM pg_stat_statements s "
                "JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname LIKE 'bench\\_%'"
            ).fetchall()
        for rolname, query, calls in rows:
            found.setdefault(rolname.removeprefix("bench_"), Counter())[query] += calls
        return found


class ConnectionLog:
    """New connections per process, from the private cluster's log
    (``log_connections``): the lines between two offsets of the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        return self.path.stat().st_size

    def count(self, start: int, end: int) -> dict[str, int]:
        with open(self.path, "rb") as log:
            log.seek(start)
            data = log.read(max(0, end - start))
        lines = re.finditer(rb"connection authorized: user=bench_(\w+)", data)
        found = Counter(m.group(1).decode() for m in lines)
        return {role: found.get(role, 0) for role in ROLES}


def by_kind(calls: Counter) -> dict[str, int]:
    """Total calls and calls per ``statement_kind``."""
    kinds: Counter = Counter()
    for query, n in calls.items():
        kinds[statement_kind(query)] += n
    return {"total": sum(calls.values()), **dict(sorted(kinds.items()))}


# --------------------------------------------------------------------------
# Redis: the server's own counters
# --------------------------------------------------------------------------


def redis_reset(client: redis.Redis) -> None:
    client.config_resetstat()


def redis_stats(client: redis.Redis) -> dict:
    """Read events (round trips) and commands per name since the last
    ``redis_reset`` made on the same ``client`` (an open connection: a new
    one would add its handshake), without this call's own ``INFO`` and the
    reset itself."""
    stats = client.info("stats")  # counts its own read event
    commandstats = client.info("commandstats")  # counts the INFO before it, not itself
    commands = Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in commandstats.items()})
    commands["info"] -= 1
    commands["config|resetstat"] -= 1
    commands = +commands  # drop what is now zero
    return {"reads": int(stats["total_reads_processed"]) - 1, "commands": dict(commands)}


# --------------------------------------------------------------------------
# Redis: who sent what (redis-cli monitor + /proc)
# --------------------------------------------------------------------------

_LINE = re.compile(r'^(\d+\.\d+) \[\d+ ([^\]]+)\] "((?:[^"\\]|\\.)*)"')


@dataclass
class ClientCounts:
    commands: int = 0
    round_trips: int = 0
    by_command: Counter = field(default_factory=Counter)

    def add(self, other: ClientCounts) -> None:
        self.commands += other.commands
        self.round_trips += other.round_trips
        self.by_command.update(other.by_command)


def count_monitor(lines: Iterable[str], *, pipeline_gap_s: float = 40e-6) -> dict[str, ClientCounts]:
    """Commands and round trips per client address (``ip:port``) from
    ``MONITOR`` lines. A round trip is a ``MULTI`` … ``EXEC`` block, or a run
    of commands from one client, none from another client in between, each
    within ``pipeline_gap_s`` of the end of the previous one (Redis runs a
    pipeline's commands one after the other as it reads them; a client
    sending a new request after a reply takes far longer). Commands a Lua
    script runs (client ``lua``) are neither commands nor round trips of
    the client; they only extend its previous command's end."""
    counts: dict[str, ClientCounts] = {}
    previous: str | None = None
    last_at: dict[str, float] = {}
    in_multi: set[str] = set()
    for line in lines:
        match = _LINE.match(line)
        if not match:
            continue
        at, client, command = float(match.group(1)), match.group(2), match.group(3).upper()
        if client == "lua":
            if previous is not None:
                last_at[previous] = at
            continue
        mine = counts.setdefault(client, ClientCounts())
        mine.commands += 1
        mine.by_command[command] += 1
        if client in in_multi:
            if command in ("EXEC", "DISCARD"):
                in_multi.discard(client)
        else:
            if not (previous == client and at - last_at.get(client, -math.inf) <= pipeline_gap_s):
                mine.round_trips += 1
            if command == "MULTI":
                in_multi.add(client)
        previous = client
        last_at[client] = at
    return counts


class Monitor:
    """``redis-cli monitor`` on a server, written to a file (another process,
    so the benchmark's own interpreter does not parse anything meanwhile);
    ``stop`` returns its lines and removes the file."""

    def __init__(self, port: int, path: Path) -> None:
        self.port = port
        self.path = path
        self._popen: subprocess.Popen | None = None
        self._out = None

    def start(self) -> Monitor:
        self._out = open(self.path, "w")  # noqa: SIM115 - redis-cli writes it until stop()
        self._popen = subprocess.Popen(["redis-cli", "-p", str(self.port), "monitor"], stdout=self._out,
                                       stderr=subprocess.STDOUT)
        return self

    def stop(self) -> list[str]:
        """Every line of the commands sent before this call. The server
        feeds a monitor asynchronously, so the last lines may still be on
        their way: an end mark is sent and waited for before redis-cli is
        stopped (it and any line after it are left out)."""
        if self._popen is not None:
            self._drain()
            self._popen.terminate()
            self._popen.wait(10)
        if self._out is not None:
            self._out.close()
        lines = self.path.read_text(errors="replace").splitlines()
        self.path.unlink(missing_ok=True)  # megabytes per run
        end = next((i for i, line in enumerate(lines) if self._END_MARK in line), len(lines))
        return lines[:end]

    _END_MARK = "chatforge-monitor-end"

    def _drain(self, timeout_s: float = 10.0) -> None:
        # A bare socket: a client library would send its handshake first,
        # on a connection nobody owns.
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as mark:
            mark.sendall(f"ECHO {self._END_MARK}\r\n".encode())
            mark.recv(64)
        deadline = time.monotonic() + timeout_s
        with open(self.path, "rb") as feed:
            seen = b""
            while self._END_MARK.encode() not in seen and time.monotonic() < deadline:
                chunk = feed.read()
                if chunk:
                    seen = seen[-len(self._END_MARK):] + chunk
                else:
                    time.sleep(0.01)


def _connections_to(ports: set[int]) -> dict[int, tuple[int, int]]:
    """Established TCP connections to any of ``ports``: inode → (server port, client port)."""
    found: dict[int, tuple[int, int]] = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] != "01":  # ESTABLISHED
                continue
            local, remote = int(parts[1].rsplit(":", 1)[1], 16), int(parts[2].rsplit(":", 1)[1], 16)
            if remote in ports:
                found[int(parts[9])] = (remote, local)
    return found


class ConnectionOwners:
    """Samples which of the named processes (``processes``: each with its
    children; ``singles``: that process alone) holds each client connection
    to the given server ports."""

    def __init__(self, processes: dict[str, int], server_ports: set[int], *,
                 singles: dict[str, int] | None = None, interval_s: float = 0.5) -> None:
        self.processes = processes
        self.singles = singles or {}
        self.server_ports = server_ports
        self.interval_s = interval_s
        self.owners: dict[tuple[int, int], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="connection-owners")

    def sample(self) -> None:
        connections = _connections_to(self.server_ports)
        if not connections:
            return
        tree = children()
        pids = [(name, pid) for name, root in self.processes.items() for pid in process_tree(root, tree)]
        pids += list(self.singles.items())
        for name, pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    key = connections.get(int(target[8:-1]))
                    if key is not None:
                        self.owners[key] = name

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> ConnectionOwners:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()

    def owner(self, server_port: int, client: str) -> str:
        try:
            return self.owners.get((server_port, int(client.rsplit(":", 1)[1])), "unattributed")
        except ValueError:
            return "unattributed"


def per_process(counts: dict[str, ClientCounts], server_port: int,
                owners: ConnectionOwners) -> dict[str, ClientCounts]:
    """Client counts merged per owning process (``unattributed``: a
    connection no sample saw)."""
    merged: dict[str, ClientCounts] = {}
    for client, mine in counts.items():
        merged.setdefault(owners.owner(server_port, client), ClientCounts()).add(mine)
    return merged


# --------------------------------------------------------------------------
# Per step
# --------------------------------------------------------------------------


def per_step_counts(counts: dict) -> list[dict]:
    """Lines of the counts table: the POST, a model turn, a tool call, all
    steps, and the run socket (per run, not a step)."""
    steps = counts["steps"]
    sql = counts["sql_by_process"]
    redis_procs = counts["redis_by_process"]
    connections = counts.get("pg_connections_by_process", {})

    def redis_of(process: str, what: str) -> dict[str, int]:
        return {server: procs.get(process, {}).get(what, 0) for server, procs in redis_procs.items()}

    def line(label: str, processes: list[str], per: int) -> dict:
        per = max(per, 1)
        total_sql = sum(sql[p]["total"] for p in processes)
        transaction = sum(sql[p].get("transaction", 0) for p in processes)
        trips = {s: sum(redis_of(p, "round_trips")[s] for p in processes) for s in redis_procs}
        commands = sum(sum(redis_of(p, "commands").values()) for p in processes)
        return {
            "label": label,
            "count": per,
            "sql": total_sql / per,
            "sql_transaction": transaction / per,
            "redis_broker": trips.get("broker", 0) / per,
            "redis_events": trips.get("events", 0) / per,
            "redis_commands": commands / per,
            "pg_connections": sum(connections.get(p, 0) for p in processes) / per,
        }

    return [
        line("POST …/messages/ (web process)", ["web"], steps["posts"]),
        line("model turn (LLM worker; creates its tool calls, or finalizes)", ["llm"], steps["turns"]),
        line("tool call (tools worker; the last of a round creates the next turn)", ["tools"],
             steps["calls"]),
        line("all steps (model turns + tool calls)", ["llm", "tools"], steps["turns"] + steps["calls"]),
        line("run socket, per run (not a step)", ["ws"], steps["runs"]),
    ]
