"""Celery reads Django's CELERY_* settings from a plain mapping made once,
not through Django's settings object on every lookup (every task sent
looks up its configuration a few dozen times)."""

from __future__ import annotations

from django.conf import settings

from chatforge.celery import app


def test_celery_sees_the_django_settings():
    assert app.conf.broker_url == settings.CELERY_BROKER_URL
    assert app.conf.task_routes == settings.CELERY_TASK_ROUTES
    assert app.conf.task_acks_late is settings.CELERY_TASK_ACKS_LATE
    assert app.conf.broker_transport_options == settings.CELERY_BROKER_TRANSPORT_OPTIONS


def test_the_settings_are_a_plain_mapping_of_every_celery_setting():
    source = app.conf.maps[1]  # after app.conf's own changes, before Celery's defaults
    assert type(source) is dict
    assert set(source) == {name for name in dir(settings) if name.startswith("CELERY_")}


def test_every_routed_queue_is_listed_for_the_embedded_worker_and_the_metrics():
    assert settings.CHATFORGE_QUEUES == ["default", "llm", "sandbox", "tools", "tools_io"]


def test_conf_can_still_be_changed_directly():
    old = app.conf.task_default_queue
    try:
        app.conf.task_default_queue = "elsewhere"
        assert app.conf.task_default_queue == "elsewhere"
    finally:
        app.conf.task_default_queue = old


def test_one_result_backend_serves_every_thread():
    import threading

    seen = []
    thread = threading.Thread(target=lambda: seen.append(app.backend))
    thread.start()
    thread.join(10)
    assert seen == [app.backend]  # not one built per thread (or greenlet) on its first send_task
