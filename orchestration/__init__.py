"""The run engine (docs/architecture.md): Celery tasks (``tasks``) over the
services (``services``), the event log (``event_log``), how steps reach
workers (``queueing``) and what the model reads (``transcript``). The
embedded worker and the LLM worker's start-up hooks are its other entry
points."""
