"""ChatForge: LLM chat with server-side tool execution on Django and Celery."""

from .celery import app as celery_app

__all__ = ["celery_app"]
