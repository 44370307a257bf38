"""What a benchmark needs before it starts a stack: a fresh, migrated
database and Redis database of its own, an API token, and percentiles;
and, once it runs, posting runs through the REST API.

Each benchmark names its own database and Redis database so two of them
(or a benchmark and the test suite) never share state.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Sequence

import httpx
import psycopg
import redis

from tests.support.stack import ROOT, TEST_SECRET_KEYS, base_env

SECRET_KEY = "bench-" + "k" * 40


def manage_env(database_url: str, redis_url: str) -> dict[str, str]:
    """The environment for ``manage.py`` commands against a benchmark's services."""
    return base_env(DATABASE_URL=database_url, REDIS_URL=redis_url, DJANGO_SECRET_KEY=SECRET_KEY,
                    CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS)


def fresh_database(*, pg: str, name: str, redis_url: str) -> str:
    """Drop and recreate database ``name`` on server ``pg``, migrate it, empty
    ``redis_url``'s database; the new database's URL."""
    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    redis.Redis.from_url(redis_url).flushdb()
    url = f"{pg}/{name}"
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT,
                   env=manage_env(url, redis_url), check=True)
    return url


def issue_token(*, database_url: str, redis_url: str) -> str:
    """An API token for the demo user (created if missing)."""
    out = subprocess.run([sys.executable, "manage.py", "create_demo_user", "--token-only"], cwd=ROOT,
                         env=manage_env(database_url, redis_url), check=True, capture_output=True, text=True)
    return out.stdout.strip()


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def add_env_argument(parser: argparse.ArgumentParser) -> None:
    """``--env NAME=VALUE`` (repeatable): a setting for every process of the
    benchmark's stack, e.g. to measure with a feature off."""
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra setting for the stack's processes (repeatable)")


def env_settings(items: Sequence[str]) -> dict[str, str]:
    """``--env`` values as a mapping."""
    return dict(item.split("=", 1) for item in items)


async def post_runs(base: str, token: str, count: int, *, model: str, content: str, concurrency: int = 16,
                    timeout_s: float = 60) -> list[str]:
    """``count`` runs of one user through the REST API, each in a
    conversation of its own, ``concurrency`` at a time; their run ids."""
    semaphore = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {token}"}

    async def one(http: httpx.AsyncClient) -> str:
        async with semaphore:
            conversation = (await http.post("/api/conversations/", json={}, headers=headers)).json()["id"]
            response = await http.post(f"/api/conversations/{conversation}/messages/",
                                       json={"content": content, "model": model}, headers=headers)
            response.raise_for_status()
            return response.json()["run_id"]

    async with httpx.AsyncClient(base_url=base, timeout=timeout_s) as http:
        return list(await asyncio.gather(*(one(http) for _ in range(count))))
