"""Django core settings: apps, middleware, security."""

from __future__ import annotations

import warnings
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from chatforge.settings.env import env

from .mode import CHATFORGE_MODE, EMBEDDED  # noqa: F401

BASE_DIR = Path(__file__).resolve().parent.parent.parent

# Embedded mode is a development/demo mode: debug on unless told otherwise.
# Distributed mode is how production runs: debug off unless told otherwise.
DEBUG: bool = env.bool("DJANGO_DEBUG", default=EMBEDDED)

_INSECURE_KEY = "chatforge-insecure-development-key-do-not-use-in-production"
SECRET_KEY: str = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. Production (DJANGO_DEBUG=false) refuses to "
            "start without a real secret key: generate one with "
            "`python -c \"import secrets; print(secrets.token_urlsafe(50))\"`."
        )
    SECRET_KEY = _INSECURE_KEY
elif not DEBUG and (SECRET_KEY == _INSECURE_KEY or len(SECRET_KEY) < 32):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is too weak for production: use at least 32 random characters."
    )

ALLOWED_HOSTS: list[str] = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS: list[str] = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "chatforge.accounts",
    "chatforge.conversations",
    "chatforge.files",
    "chatforge.api",
    "chatforge.realtime",
    "chatforge.catalog",
    "chatforge.scheduling",
    "chatforge.mcp",
    "chatforge.llm",
    "chatforge.openai_api",
    "chatforge.web",
    "chatforge.adminsite",
]

MIDDLEWARE = [
    # Requests by route and status, and their latency (docs/observability.md).
    "chatforge.observability.http_metrics.HttpMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A NUL character in the URL is a 400 and a cookie holding one is dropped,
    # before any session, authentication or view reads the database with it.
    "chatforge.web.nul_guard.RefuseNulInURL",
    # A view failing because Postgres, Redis or the broker is unreachable
    # answers 503 + Retry-After (JSON) instead of 500.
    "chatforge.api.unavailable.ServiceUnavailableMiddleware",
    # Streaming responses (SSE, /v1 streams) return the view's pooled
    # database connection before the stream starts instead of at its end.
    "chatforge.db.connections.ReleaseBeforeStreaming",
    # Serves the admin's and the web pages' static files from the web process
    # itself, so no separate file server is needed (with far-future caching
    # of hashed names after `collectstatic`).
    "chatforge.web.middleware.AsyncFileResponses",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # /api/x answers as /api/x/ (no redirect, which would lose a POST's body).
    "chatforge.api.trailing_slash.ApiTrailingSlashMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request_id (X-Request-ID) and the signed-in user on every log line of the request.
    "chatforge.observability.log_context.RequestContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Content-Security-Policy on every response (chatforge/settings/security.py).
    "chatforge.web.content_security_policy.CSPMiddleware",
    # A client that failed to sign in too often is refused before its next
    # password is checked (429 + Retry-After; docs/security.md).
    "chatforge.accounts.middleware.SignInThrottleMiddleware",
]

ROOT_URLCONF = "chatforge.urls"
ASGI_APPLICATION = "chatforge.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Without `collectstatic` (embedded mode, development, the tests) WhiteNoise
# finds files in the apps' static folders; production images run
# `collectstatic` and may turn this off (DJANGO_STATIC_USE_FINDERS=false).
WHITENOISE_USE_FINDERS: bool = env.bool("DJANGO_STATIC_USE_FINDERS", default=True)
if WHITENOISE_USE_FINDERS:
    # Without `collectstatic` STATIC_ROOT does not exist, and WhiteNoise says
    # so at every start although the finders serve every file.
    warnings.filterwarnings("ignore", message="No directory at", module="whitenoise.base")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat"
LOGOUT_REDIRECT_URL = "login"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# Each long-lived process (web, worker before its pool forks, prefork child)
# freezes the objects it holds once started out of the garbage collector's
# full passes, which otherwise stop it for ~150 ms each under load
# (chatforge/observability/gc_freeze.py).
CHATFORGE_GC_FREEZE: bool = env.bool("CHATFORGE_GC_FREEZE", default=True)
# Threads a web process runs requests to sync views on (the REST API, the
# admin, the pages), lent one per request in arrival order: a burst of
# POSTs is answered first come, first served instead of all together at
# the end (chatforge/serving/request_threads.py). Keep it at or below
# DATABASE_POOL_MAX_SIZE, since each such request may hold a connection.
CHATFORGE_WEB_REQUEST_THREADS: int = env.int("CHATFORGE_WEB_REQUEST_THREADS", default=8)
