"""Metrics (docs/observability.md)."""

from __future__ import annotations

from chatforge.settings.env import env

# GET /metrics needs "Authorization: Bearer <this>" (or a signed-in staff
# user). Empty: only staff can read the metrics.
CHATFORGE_METRICS_TOKEN: str = env.str("CHATFORGE_METRICS_TOKEN", default="")
# Each Celery worker serves its metrics on this port (0: not served). Read
# from the environment before Django starts, too (observability/worker_setup.py).
CHATFORGE_WORKER_METRICS_PORT: int = env.int("CHATFORGE_WORKER_METRICS_PORT", default=0)
CHATFORGE_WORKER_METRICS_ADDR: str = env.str("CHATFORGE_WORKER_METRICS_ADDR", default="0.0.0.0")
# OpenTelemetry traces over OTLP/HTTP to this collector (e.g.
# http://otel-collector:4318); empty: no tracing.
CHATFORGE_OTLP_ENDPOINT: str = env.str("CHATFORGE_OTLP_ENDPOINT", default="")
