"""Django REST framework and the OpenAPI description."""

from __future__ import annotations

from chatforge.settings.env import env

from .base import DEBUG
from .mode import EMBEDDED, REDIS_URL

# Messages a user may post per period ("30/min", "500/day"; empty: no limit).
CHATFORGE_MESSAGE_RATE: str = env.str("CHATFORGE_MESSAGE_RATE", default="30/min")
# The model /v1's "background-tasks" alias answers with: what frontends
# point their title, tag and follow-up generation at (docs/open-webui.md).
# Unset: the default model; "none": no such alias.
_background_tasks_model = env.str("CHATFORGE_OPENAI_BACKGROUND_TASKS_MODEL", default="").strip()
CHATFORGE_OPENAI_BACKGROUND_TASKS_MODEL: str | None = (
    None if _background_tasks_model.lower() == "none" else _background_tasks_model or None
)
CHATFORGE_OPENAI_BACKGROUND_TASKS: bool = _background_tasks_model.lower() != "none"
# Largest request body accepted (413 beyond).
CHATFORGE_MAX_REQUEST_BYTES: int = env.int("CHATFORGE_MAX_REQUEST_BYTES", default=2 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = CHATFORGE_MAX_REQUEST_BYTES
# A failed CSRF check answers the JSON error on API paths (Django's page elsewhere).
CSRF_FAILURE_VIEW = "chatforge.web.errors.csrf_failure_view"

# Throttle counts must be shared by every web process: Redis in distributed mode.
if EMBEDDED:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    # Django's ASGI handler runs each request in a thread of its own, and each
    # takes a Redis connection for the throttle: redis-py's pool stops at 100
    # by default, so the 101st concurrent request failed with a 500.
    CACHES = {
        "default": {
            "BACKEND": "chatforge.db.redis_cache.ReusingRedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"max_connections": 10_000},
        }
    }

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chatforge.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "chatforge.api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "chatforge.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PARSER_CLASSES": [
        "chatforge.api.parsers.CheckedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # The browsable API is a development aid: HTML forms for every route
    # (DRF's page, made to keep to the Content-Security-Policy).
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["chatforge.api.renderers.BrowsableAPIRenderer"] if DEBUG else []),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "ChatForge API",
    "DESCRIPTION": "LLM chat with server-side tool execution.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "chatforge.api.schema_paths.add_non_drf_paths",
        "chatforge.api.schema_errors.add_error_responses",
    ],
}
