"""Run by tests/runtime/test_gevent_redis_probe.py in a process of its own,
as a gevent worker runs: monkey-patched first, then the direct check
installed. Prints one JSON line of findings."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import gevent  # noqa: E402
import redis  # noqa: E402
import redis._parsers.hiredis as hiredis_parser  # noqa: E402

from chatforge.runtime import gevent_redis_probe  # noqa: E402

found: dict = {"installed": gevent_redis_probe.install(), "again": gevent_redis_probe.install()}
check = hiredis_parser._socket_can_read
found["check"] = check.__name__

a, b = socket.socketpair()
found["silent"] = check(a, 0)
b.send(b"+OK\r\n")
found["with_data"] = check(a, 0)
a.recv(16)

# A check that may wait stays cooperative: other greenlets run meanwhile.
ticks = []


def ticker() -> None:
    while True:
        ticks.append(time.monotonic())
        gevent.sleep(0.01)


other = gevent.spawn(ticker)
gevent.sleep(0)
started = time.monotonic()
found["waited"] = check(a, 0.2)
found["waited_s"] = round(time.monotonic() - started, 1)
other.kill()
found["ticks_while_waiting"] = sum(1 for t in ticks if t > started)
b.close()
found["peer_closed"] = check(a, 0)
a.close()

# Commands through a pool, as the worker's clients send them.
client = redis.Redis.from_url(sys.argv[1])
key = f"probe:{uuid.uuid4().hex}"
client.set(key, "stored")
found["read_back"] = [client.get(key).decode() for _ in range(3)]
client.delete(key)
print(json.dumps(found))
