"""Settings for the pytest process: distributed mode against the local
Postgres and Redis (overridable through the same environment variables).

The pytest process gets a broker database that no worker listens on, so
tests that deliver steps directly can see exactly what the engine enqueued.
The worker and server processes the integration tests start use the real
``chatforge.settings`` with their own environment (see ``tests/support/stack.py``).
"""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# ``make test`` runs test files in parallel processes (pytest-xdist); each
# gets Redis databases of its own, or one worker's stack would consume the
# other's tasks and a flush in one would empty the other's queues. Postgres
# needs nothing: pytest-django gives each worker its own test database.
# (main / the pytest process's idle broker / the test tools' effect
# counters; 1, 5-8 and 11 belong to test modules with private stacks, which
# run in one worker at a time.) Explicit URLs in the environment win: set
# them only for a serial run.
_REDIS_DBS = {"gw0": (15, 14, 13), "gw1": (12, 10, 9), "gw2": (4, 3, 2)}
_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
if _worker not in _REDIS_DBS:
    raise RuntimeError(
        f"pytest-xdist worker {_worker}: tests/settings.py has Redis databases for {len(_REDIS_DBS)} test "
        f"processes; run with TEST_PROCESSES (pytest -n) of at most {len(_REDIS_DBS)}.")
_main_db, _idle_db, _effects_db = _REDIS_DBS[_worker]
_redis_server = "redis://127.0.0.1:6379"


def _serial_run() -> bool:
    """A pytest run outside xdist (``pytest tests/x.py``), neither worker nor controller."""
    return "PYTEST_XDIST_WORKER" not in os.environ and not any(
        arg.startswith(("-n", "--numprocesses")) for arg in sys.argv[1:])


def _private_redis() -> str | None:
    """A Redis server of this process's own on a free port, stopped at exit;
    None where redis-server is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                               "no", "--dir", tempfile.gettempdir()], stdout=subprocess.DEVNULL)
    atexit.register(server.terminate)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return f"redis://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.025)
    raise RuntimeError(f"redis-server did not start on port {port}")


# A serial run beside another (a second engineer's, or one beside `make
# test`) would share gw0's Redis databases and test database with it: one
# run's workers took the other's tasks, and one's teardown dropped the
# other's database. A serial run gets its own Redis server and test
# database instead, unless the person running it named REDIS_URL.
_SERIAL = _serial_run() and "REDIS_URL" not in os.environ
if _SERIAL:
    _redis_server = _private_redis() or _redis_server
# The workers inherit the environment of the process that started them,
# where these defaults were already chosen (for gw0): a name listed here was
# chosen by this file, not by the person running the tests, and is chosen
# again for this worker.
_CHOSEN = "CHATFORGE_TEST_CHOSEN_URLS"
_chosen_before = set(os.environ.get(_CHOSEN, "").split(","))
_chosen_now = []
for _name, _url in (
    ("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/chatforge"),
    ("REDIS_URL", f"{_redis_server}/{_main_db}"),
    ("CHATFORGE_TEST_IDLE_BROKER_URL", f"{_redis_server}/{_idle_db}"),
    ("CHATFORGE_TEST_EFFECTS_REDIS_URL", f"{_redis_server}/{_effects_db}"),
):
    if _name not in os.environ or _name in _chosen_before:
        os.environ[_name] = _url
        _chosen_now.append(_name)
os.environ[_CHOSEN] = ",".join(_chosen_now)
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-0123456789-abcdefghijklmnop")
os.environ.setdefault("CHATFORGE_DEMO_TOKEN_DELAY_S", "0")
os.environ.setdefault("CHATFORGE_TOOL_MODULES", "tests.support.tools")
# A fixed key so tests can read what they stored (never used outside tests).
os.environ.setdefault("CHATFORGE_SECRET_KEYS", "uCKE6r66a2mBYRW6KXsq-jfMAByMIpJczrLdXosbxPo=")
os.environ.setdefault("CHATFORGE_TOOL_CATALOG_TTL_S", "0")
os.environ.setdefault("CHATFORGE_LLM_RETRY_INITIAL_S", "0.05")
# Files' bytes in a directory of the tests' own (never the checkout's), which
# the processes of the integration stacks share (tests/support/stack.py).
os.environ.setdefault("CHATFORGE_FILES_DIR", os.path.join(tempfile.gettempdir(), "chatforge-test-files"))

from chatforge.settings import *  # noqa: E402,F401,F403

CELERY_BROKER_URL = os.environ["CHATFORGE_TEST_IDLE_BROKER_URL"]
if _SERIAL:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_serial_{os.getpid()}"}  # noqa: F405

# Quick hashes for the users the tests make (tests/support/password_hashers.py).
from django.conf import global_settings  # noqa: E402

PASSWORD_HASHERS = ["tests.support.password_hashers.QuickPBKDF2PasswordHasher", *global_settings.PASSWORD_HASHERS]
