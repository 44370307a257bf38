"""Settings come from the environment and refuse unsafe production setups."""

from __future__ import annotations

import subprocess
import sys

from tests.support.stack import ROOT, TEST_SECRET_KEYS, base_env

PRINT_MODE = "import django; django.setup(); from django.conf import settings; print(settings.CHATFORGE_MODE, settings.CELERY_BROKER_URL, settings.DATABASES['default']['ENGINE'])"


def run_python(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PRINT_MODE], cwd=ROOT, env=env, capture_output=True, text=True)


def test_embedded_by_default():
    result = run_python(base_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["embedded", "memory://localhost/", "django.db.backends.sqlite3"]


def test_distributed_with_both_urls():
    result = run_python(base_env(DATABASE_URL="postgres://u@127.0.0.1:5432/x", REDIS_URL="redis://127.0.0.1:6379/3",
                                 DJANGO_SECRET_KEY="s" * 40, CHATFORGE_SECRET_KEYS=TEST_SECRET_KEYS))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["distributed", "redis://127.0.0.1:6379/3", "chatforge.db.postgresql"]  # Django's, with its pool's check (chatforge/db)


def test_production_refuses_to_start_without_a_secret_key():
    result = run_python(base_env(DATABASE_URL="postgres://u@127.0.0.1:5432/x", REDIS_URL="redis://127.0.0.1:6379/3"))
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in result.stderr


def test_production_refuses_a_weak_secret_key():
    result = run_python(base_env(DJANGO_DEBUG="false", DJANGO_SECRET_KEY="short"))
    assert result.returncode != 0
    assert "too weak" in result.stderr


def test_half_configured_distributed_mode_is_refused():
    result = run_python(base_env(DATABASE_URL="postgres://u@127.0.0.1:5432/x"))
    assert result.returncode != 0
    assert "needs both DATABASE_URL and REDIS_URL" in result.stderr


def test_production_refuses_to_start_without_secret_encryption_keys():
    result = run_python(base_env(DJANGO_DEBUG="false", DJANGO_SECRET_KEY="s" * 40))
    assert result.returncode != 0
    assert "CHATFORGE_SECRET_KEYS" in result.stderr
