"""The run engine's services. Celery tasks, views and consumers call these;
they hold the logic (state changes, locking, events, dispatch)."""
