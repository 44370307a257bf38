"""Which hosts can run sandboxes, as their sandbox workers report it.

The catalog offers sandboxed tools (the python tool, script tools) only
while a sandbox worker has said within ``CHATFORGE_SANDBOX_REPORT_TTL_S``
that it can run them (docs/sandbox.md, "Where it runs"): the web process
and the LLM worker deciding what to offer may be on hosts without
bubblewrap, and a tool offered with no worker to run it would leave the
model's calls waiting in a queue nobody reads. A worker whose probe failed
reports that too, with its reason, for the admin and the logs.

The reports are one hash in the broker's Redis (host → JSON); embedded
mode has none, and offers no sandboxed tool.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from django.conf import settings

from chatforge.workers.broker_client import broker_client

KEY = "chatforge:sandbox:hosts"
_READ_EVERY_S = 5.0
_last_read: tuple[float, Offer] | None = None


@dataclass(frozen=True)
class HostReport:
    host: str
    ok: bool
    reason: str
    age_s: float


@dataclass(frozen=True)
class Offer:
    ok: bool
    reason: str  # why sandboxed tools are not offered ("" when they are)
    hosts: tuple[HostReport, ...] = ()


def report(ok: bool, reason: str = "", *, host: str | None = None) -> None:
    """This worker's word: it can (or cannot, and why) run sandboxes."""
    client = broker_client()
    if client is None:
        return
    name = host or f"{socket.gethostname()}:{_pid()}"
    client.hset(KEY, name, json.dumps({"ok": ok, "reason": reason, "at": time.time()}))


def withdraw(*, host: str | None = None) -> None:
    """This worker stops (its report would otherwise hold until it expires)."""
    client = broker_client()
    if client is not None:
        client.hdel(KEY, host or f"{socket.gethostname()}:{_pid()}")


def offer(*, fresh: bool = False) -> Offer:
    """Whether sandboxed tools are offered now, read at most every few seconds."""
    global _last_read
    now = time.monotonic()
    if not fresh and _last_read is not None and now - _last_read[0] < _READ_EVERY_S:
        return _last_read[1]
    result = _read()
    _last_read = (now, result)
    return result


def forget() -> None:
    """The next ``offer`` reads the reports again (tests)."""
    global _last_read
    _last_read = None


def _read() -> Offer:
    if not settings.CHATFORGE_SANDBOX_ENABLED:
        why = ("embedded mode has no sandbox worker" if settings.EMBEDDED
               else "CHATFORGE_SANDBOX_ENABLED is off")
        return Offer(False, f"sandboxed tools are not offered: {why} (docs/sandbox.md)")
    client = broker_client()
    if client is None:
        return Offer(False, "sandboxed tools are not offered: there is no broker to hear sandbox workers on")
    try:
        raw = client.hgetall(KEY)
    except Exception as exc:  # Redis unreachable: offer nothing rather than calls nobody runs
        return Offer(False, f"sandboxed tools are not offered: the sandbox reports could not be read ({exc})")
    ttl, now = settings.CHATFORGE_SANDBOX_REPORT_TTL_S, time.time()
    hosts = []
    for name, value in raw.items():
        try:
            data = json.loads(value)
            hosts.append(HostReport(name.decode() if isinstance(name, bytes) else str(name), bool(data["ok"]),
                                    str(data.get("reason", "")), max(0.0, now - float(data["at"]))))
        except (ValueError, KeyError, TypeError):
            continue
    live = [host for host in hosts if host.age_s <= ttl]
    if any(host.ok for host in live):
        return Offer(True, "", tuple(sorted(hosts, key=lambda h: h.host)))
    failing = [host for host in live if not host.ok]
    if failing:
        reason = "; ".join(f"{host.host}: {host.reason}" for host in failing[:3])
        return Offer(False, f"sandboxed tools are not offered: no sandbox worker can run sandboxes ({reason})",
                     tuple(hosts))
    return Offer(False, f"sandboxed tools are not offered: no sandbox worker has reported in the last {ttl:g} s "
                        "(start one: celery -A chatforge worker -Q sandbox, on a host with bubblewrap; "
                        "docs/sandbox.md)", tuple(hosts))


def _pid() -> int:
    return os.getpid()
