"""Hosts on a private virtual network, made with network namespaces, for
tests that must show the system working across machines.

On one machine every process shares one network stack, so a test cannot tell
a fleet from processes that only work next to their database (an address
fixed to loopback, a worker that needs the web host's files), and it cannot
cut one host off: a killed process closes its sockets cleanly, while a host
that loses its network just goes silent. A network namespace is a host of
its own (interfaces, addresses, ``lo``, routes), and a link brought down
cuts it off like a pulled cable.

Layout of a ``VirtualNetwork`` (every name carries a random token, so runs in
parallel never collide, and ``/24`` subnets are chosen clear of the routes
the machine already has)::

    root namespace (the test process)     cf-<token>-t        10.X.Y.1/24
        | veth
    cf-<token>-hub: bridge br0 -- veth to-db  -- cf-<token>-db  eth0 10.X.Y.2
                               -- veth to-web -- cf-<token>-web eth0 10.X.Y.3
                               -- veth to-w1  -- cf-<token>-w1  eth0 10.X.Y.4 ...

The bridge lives in a namespace of its own so that nothing but one veth end
(and its route) is added to the machine's own network. Creating namespaces
needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): ``namespaces_available()``
says whether this machine allows it and why not.

Cleanup is guaranteed by ``virtual_network()``: processes left in the
namespaces are killed, the root veth and the namespaces are deleted, even
when the test fails. A network whose owner died before cleaning up (a
SIGKILLed pytest) is found by its ownership record and removed by the next
``virtual_network()``; namespaces without a record of ours are never touched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "cf-"
HUB = "hub"
CLIENT = "t"  # the root namespace's end: the test process's own host
HOST_IFACE = "eth0"
BRIDGE = "br0"
LOOPBACK = "127.0.0.1"
COMMAND_TIMEOUT_S = 20.0
# Where the ownership records of live networks are kept (one JSON file each).
RECORDS = Path(tempfile.gettempdir()) / "chatforge-netns"


class NetnsError(RuntimeError):
    """An ``ip`` command failed while building or removing a network."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _port(name: str) -> str:
    """The hub's end of a host's veth. Always named with ``dev``/``name``
    keywords too: ip takes a bare short word (``t``, ``a``) for an
    abbreviated keyword (``txqueuelen``, ``address``)."""
    return f"to-{name}"


def namespaces_available() -> tuple[bool, str]:
    """Whether network namespaces with veths and a bridge can be made here:
    ``(True, "")`` or ``(False, why not)``. Makes one namespace with a veth
    pair and a bridge inside it, then deletes it."""
    if shutil.which("ip") is None:
        return False, "the ip command (iproute2) is not installed"
    probe = f"{PREFIX}probe-{secrets.token_hex(4)}"
    try:
        _ip("netns", "add", probe)
    except (NetnsError, OSError, subprocess.SubprocessError) as exc:
        return False, f"cannot create a network namespace (needs root or CAP_SYS_ADMIN): {exc}"
    try:
        _ip("-n", probe, "link", "add", "name", "cf0", "type", "veth", "peer", "name", "cf1")
        _ip("-n", probe, "link", "add", "name", BRIDGE, "type", "bridge")
        return True, ""
    except (NetnsError, OSError, subprocess.SubprocessError) as exc:
        return False, f"namespaces work but veth or bridge links cannot be made: {exc}"
    finally:
        _ip("netns", "delete", probe, check=False)


# -- hosts -----------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """One host of the test's fleet: its address and how to run a command on it."""

    name: str
    address: str
    namespace: str | None = None  # None: a process on the machine's loopback

    def prefix(self) -> list[str]:
        """What to put before a command so that it runs on this host."""
        return ["ip", "netns", "exec", self.namespace] if self.namespace else []

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``args`` on this host (``ip netns exec`` replaces itself with
        the command, so the Popen's pid is the command's own)."""
        return subprocess.Popen([*self.prefix(), *args], **kwargs)


class LoopbackNetwork:
    """The fallback where namespaces cannot be made: every host is a set of
    processes on 127.0.0.1. Cutting a host's link is not possible there, so
    ``cut`` says so and cutting a host off means killing its processes."""

    isolated = False
    trust_network: str | None = None  # every client is on the loopback

    def __init__(self, names: Sequence[str]) -> None:
        self.client_address = LOOPBACK
        self.hosts = {name: Host(name, LOOPBACK) for name in names}

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def describe(self) -> str:
        return f"loopback: every host ({', '.join(self.hosts)}) on {LOOPBACK}"

    def cut(self, name: str) -> bool:
        return False

    def partition(self, name: str) -> bool:
        return False

    def heal(self, name: str) -> None:
        pass

    def kill_processes(self, name: str) -> list[int]:
        return []

    def processes(self, name: str) -> list[int]:
        return []


# -- the namespace network -------------------------------------------------


def _taken_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 route and address the root namespace has, as networks."""
    taken: list[ipaddress.IPv4Network] = []
    for args in (("-j", "-4", "route", "show", "table", "all"), ("-j", "-4", "addr", "show")):
        for entry in json.loads(_ip(*args).stdout or "[]"):
            candidates = [entry.get("dst")] + [f"{a['local']}/{a['prefixlen']}" for a in entry.get("addr_info", [])]
            for text in candidates:
                if text and text != "default":
                    with contextlib.suppress(ValueError):
                        taken.append(ipaddress.ip_network(text, strict=False))
    return taken


def _free_subnet() -> ipaddress.IPv4Network:
    """A random 10.X.Y.0/24 that overlaps nothing the machine routes."""
    taken = _taken_networks()
    rng = random.SystemRandom()
    for _ in range(200):
        subnet = ipaddress.IPv4Network(f"10.{rng.randint(64, 250)}.{rng.randint(0, 255)}.0/24")
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise NetnsError("no free 10.x.y.0/24 subnet: the machine routes them all")


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists. A pid reused by another
    process counts as alive: the stale network is then left alone (removed
    by a later run), which is the safe mistake."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class VirtualNetwork:
    """A bridge in a hub namespace, one namespace per host, and the root
    namespace on the bridge too (as the test's client host)."""

    token: str
    subnet: ipaddress.IPv4Network
    hosts: dict[str, Host] = field(default_factory=dict)
    isolated = True

    @property
    def client_address(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def trust_network(self) -> str:
        """The subnet, whose hosts a server may let in (they are all ours)."""
        return str(self.subnet)

    @property
    def client_link(self) -> str:
        return f"{PREFIX}{self.token}-{CLIENT}"

    def namespace(self, name: str) -> str:
        return f"{PREFIX}{self.token}-{name}"

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def describe(self) -> str:
        hosts = ", ".join(f"{h.namespace} {h.address}" for h in self.hosts.values())
        return (f"namespaces on {self.subnet} (bridge in {self.namespace(HUB)}; "
                f"test process {self.client_address} on {self.client_link}): {hosts}")

    # -- building --------------------------------------------------------

    def _record(self) -> Path:
        return RECORDS / f"{self.token}.json"

    def _write_record(self) -> None:
        """Written before anything is created, so a crash at any point leaves
        a record that lets a later run remove what was made."""
        RECORDS.mkdir(parents=True, exist_ok=True)
        self._record().write_text(json.dumps({"pid": os.getpid()}))

    def build(self, names: Sequence[str]) -> VirtualNetwork:
        self._write_record()
        hub = self.namespace(HUB)
        _ip("netns", "add", hub)
        _ip("-n", hub, "link", "set", "dev", "lo", "up")
        _ip("-n", hub, "link", "add", "name", BRIDGE, "type", "bridge")
        _ip("-n", hub, "link", "set", "dev", BRIDGE, "up")
        # The root namespace's end: the test process reaches every host, and
        # every host reaches the servers the test process runs (the fake LLM).
        _ip("link", "add", "name", self.client_link, "type", "veth", "peer", "name", _port(CLIENT), "netns", hub)
        _ip("-n", hub, "link", "set", "dev", _port(CLIENT), "master", BRIDGE, "up")
        _ip("addr", "add", f"{self.client_address}/{self.subnet.prefixlen}", "dev", self.client_link)
        _ip("link", "set", "dev", self.client_link, "up")
        for offset, name in enumerate(names, start=2):
            self._add_host(name, str(self.subnet.network_address + offset))
        return self

    def _add_host(self, name: str, address: str) -> None:
        namespace, hub = self.namespace(name), self.namespace(HUB)
        _ip("netns", "add", namespace)
        _ip("-n", namespace, "link", "set", "dev", "lo", "up")
        _ip("-n", hub, "link", "add", "name", _port(name), "type", "veth", "peer", "name", HOST_IFACE,
            "netns", namespace)
        _ip("-n", hub, "link", "set", "dev", _port(name), "master", BRIDGE, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", HOST_IFACE)
        _ip("-n", namespace, "link", "set", "dev", HOST_IFACE, "up")
        self.hosts[name] = Host(name, address, namespace)

    # -- faults ----------------------------------------------------------

    def cut(self, name: str) -> bool:
        """Bring the host's only link down: its peers see silence, not a
        closed connection (no FIN or RST can leave the host any more)."""
        _ip("-n", self.namespace(name), "link", "set", "dev", HOST_IFACE, "down")
        return True

    def partition(self, name: str) -> bool:
        """Take the host off the network, to be healed later: the hub's end
        of its link goes down, so its packets and its peers' vanish (no FIN,
        no RST, both ways) while its own interface keeps its address and
        routes, as when a switch port or a cable fails."""
        _ip("-n", self.namespace(HUB), "link", "set", "dev", _port(name), "down")
        return True

    def heal(self, name: str) -> None:
        """Put a partitioned host back: connections that outlived the
        partition carry on (TCP retransmits), the others get a reset."""
        _ip("-n", self.namespace(HUB), "link", "set", "dev", _port(name), "master", BRIDGE, "up")

    def processes(self, name: str) -> list[int]:
        """Pids of the processes running in the host's namespace."""
        done = _ip("netns", "pids", self.namespace(name), check=False)
        return [int(pid) for pid in done.stdout.split()] if done.returncode == 0 else []

    def kill_processes(self, name: str, timeout: float = 10.0) -> list[int]:
        """SIGKILL every process on the host (whoever started it); the pids killed."""
        return _kill_namespace(self.namespace(name), timeout)

    # -- removal ---------------------------------------------------------

    def destroy(self) -> None:
        """Remove everything this network made; raise if anything is left."""
        _remove_token(self.token)
        leftovers = _leftovers(self.token)
        if leftovers:
            raise NetnsError(f"network {self.token} left behind: {leftovers}")


def _kill_namespace(namespace: str, timeout: float) -> list[int]:
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = _ip("netns", "pids", namespace, check=False)
        pids = [int(pid) for pid in done.stdout.split()] if done.returncode == 0 else []
        if not pids:
            return killed
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.1)
    raise NetnsError(f"processes still running in {namespace} after {timeout}s")


def _namespaces(token: str) -> list[str]:
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    names = [line.split()[0] for line in listed if line.strip()]
    return [name for name in names if name.startswith(f"{PREFIX}{token}-")]


def _client_link_exists(token: str) -> bool:
    return _ip("link", "show", "dev", f"{PREFIX}{token}-{CLIENT}", check=False).returncode == 0


def _leftovers(token: str, timeout: float = 10.0) -> list[str]:
    """What of the network still exists, after waiting for the kernel's
    asynchronous teardown of deleted namespaces."""
    deadline = time.monotonic() + timeout
    while True:
        left = _namespaces(token) + ([f"{PREFIX}{token}-{CLIENT}"] if _client_link_exists(token) else [])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _remove_token(token: str) -> None:
    """Kill the processes, delete the root veth (deleting one end removes
    both, at once instead of with the hub's asynchronous teardown), then the
    namespaces, then the ownership record. Best effort at each step."""
    for namespace in _namespaces(token):
        with contextlib.suppress(NetnsError):
            _kill_namespace(namespace, timeout=10)
    if _client_link_exists(token):
        _ip("link", "delete", "dev", f"{PREFIX}{token}-{CLIENT}", check=False)
    for namespace in _namespaces(token):
        _ip("netns", "delete", namespace, check=False)
    (RECORDS / f"{token}.json").unlink(missing_ok=True)


def remove_stale_networks() -> list[str]:
    """Remove the networks whose owning process is gone; the tokens removed.
    Only networks with one of our ownership records are considered."""
    removed: list[str] = []
    for record in sorted(RECORDS.glob("*.json")) if RECORDS.is_dir() else []:
        try:
            owner = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if _alive(int(owner.get("pid", 0))):
            continue  # its owner is alive (perhaps a test running in parallel)
        _remove_token(record.stem)
        removed.append(record.stem)
    return removed


@contextlib.contextmanager
def virtual_network(names: Sequence[str]) -> Iterator[VirtualNetwork]:
    """A network with one namespace per name, removed on the way out however
    the block ends."""
    remove_stale_networks()
    network = VirtualNetwork(token=secrets.token_hex(3), subnet=_free_subnet())
    try:
        yield network.build(names)
    finally:
        network.destroy()
