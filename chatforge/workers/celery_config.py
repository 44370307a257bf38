"""Celery's configuration: Django's ``CELERY_*`` settings, read once.

``app.config_from_object("django.conf:settings", namespace="CELERY")`` makes
every configuration lookup go through Django's settings object: Celery tries
each key under several spellings (``CELERY_TASK_SERIALIZER``,
``task_serializer``, the old names) in each of its maps, and each miss in
Django's settings is an ``AttributeError`` raised and caught. A task's send
makes a few dozen such lookups; under cProfile they were a fifth of
``send_task``. This mapping holds the same values, taken from Django's
settings when Celery first reads its configuration (after Django's settings
are loaded, as before), so a lookup is a dict access.

Django settings changed later (``override_settings``) do not reach Celery;
nothing changes a ``CELERY_*`` setting at run time, and ``app.conf`` can
still be set directly (its own changes come first).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

CELERY: dict[str, Any] = {name: getattr(settings, name) for name in dir(settings) if name.startswith("CELERY_")}
