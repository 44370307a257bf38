"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from .errors import method_not_allowed

_READ = ["GET", "HEAD"]


# Probes change nothing: no CSRF check, and any other method is a JSON 405
# (a POST answered Django's HTML CSRF page).
@csrf_exempt
def healthz(request: HttpRequest) -> JsonResponse:
    if request.method not in _READ:
        return method_not_allowed(request, _READ)
    return JsonResponse({"status": "ok"})


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


def _redis_ok(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except Exception:
        return False


@csrf_exempt
def readyz(request: HttpRequest) -> JsonResponse:
    if request.method not in _READ:
        return method_not_allowed(request, _READ)
    checks = {"database": _database_ok()}
    if not settings.EMBEDDED:
        checks["broker"] = _redis_ok(settings.CELERY_BROKER_URL)
        checks["event_log"] = _redis_ok(settings.CHATFORGE_EVENT_LOG_REDIS_URL)
    failing = [name for name, ok in checks.items() if not ok]
    body = {"status": "ok" if not failing else "unavailable", "mode": settings.CHATFORGE_MODE, "checks": checks}
    if failing:
        body["error"] = {
            "code": "not_ready",
            "message": f"Not ready: cannot reach {', '.join(failing)}.",
            "details": checks,
        }
    return JsonResponse(body, status=200 if not failing else 503)
