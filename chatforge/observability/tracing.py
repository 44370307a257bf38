"""OpenTelemetry traces, off unless CHATFORGE_OTLP_ENDPOINT is set.

One run is one trace: the web request that posts the message is the root;
the Celery instrumentation carries the W3C trace context in each task's
headers, so the model turn it enqueues, the tool calls that turn enqueues
and the turns after them are its descendants, on whichever host runs them.
Inside a step, ``step_span`` marks the model call and the tool call, with the
run's ids as attributes. Spans go out over OTLP/HTTP in batches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from opentelemetry import trace

logger = logging.getLogger(__name__)
_configured = False
tracer = trace.get_tracer("chatforge")


def configure_tracing(service: str, *, instrument_django: bool = False) -> bool:
    """Set up the exporter and the instrumentations for this process (once);
    False when tracing is off."""
    global _configured
    endpoint = settings.CHATFORGE_OTLP_ENDPOINT
    if _configured or not endpoint:
        return _configured
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")))
    trace.set_tracer_provider(provider)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    if instrument_django:
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().instrument(tracer_provider=provider)
    _configured = True
    logger.info("traces are sent to %s as %s", endpoint, service)
    return True


@contextmanager
def step_span(name: str, **attributes: Any) -> Iterator[None]:
    """A span for one part of a step (a no-op when tracing is off)."""
    with tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None}):
        yield
