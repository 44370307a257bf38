"""Settings for the pytest process: distributed mode against the local
Postgres and Redis (overridable through the same environment variables).

The pytest process gets a broker database that no worker listens on, so
tests that deliver steps directly can see exactly what the engine enqueued.
The worker and server processes the integration tests start use the real
``chatforge.settings`` with their own environment (see ``tests/support/stack.py``).
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/chatforge")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-0123456789-abcdefghijklmnop")
os.environ.setdefault("CHATFORGE_DEMO_TOKEN_DELAY_S", "0")
os.environ.setdefault("CHATFORGE_TOOL_MODULES", "tests.support.tools")
# A fixed key so tests can read what they stored (never used outside tests).
os.environ.setdefault("CHATFORGE_SECRET_KEYS", "uCKE6r66a2mBYRW6KXsq-jfMAByMIpJczrLdXosbxPo=")
os.environ.setdefault("CHATFORGE_TOOL_CATALOG_TTL_S", "0")
os.environ.setdefault("CHATFORGE_LLM_RETRY_INITIAL_S", "0.05")

from chatforge.settings import *  # noqa: E402,F401,F403

CELERY_BROKER_URL = os.environ.get("CHATFORGE_TEST_IDLE_BROKER_URL", "redis://127.0.0.1:6379/14")
