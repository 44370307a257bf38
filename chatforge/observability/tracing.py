"""OpenTelemetry traces, off unless CHATFORGE_OTLP_ENDPOINT is set.

One run is one trace: the web request that posts the message is the root;
the Celery instrumentation carries the W3C trace context in each task's
headers, so the model turn it enqueues, the tool calls that turn enqueues
and the turns after them are its descendants, on whichever host runs them.
Inside a step, ``step_span`` marks the model call and the tool call, with the
run's ids as attributes. Spans go out over OTLP/HTTP in batches.

Some steps are sent from outside their run's trace: by the sweeper
re-driving a stalled run, by the run a queued run waited behind, or when
fair scheduling lets a parked step go. The run keeps the traceparent of the
request that posted it (``Run.trace_parent``), and such a send happens under
it (``in_run_trace``), so a run is one trace however its steps were sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from opentelemetry import context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

logger = logging.getLogger(__name__)
_configured = False
tracer = trace.get_tracer("chatforge")
_propagator = TraceContextTextMapPropagator()


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


def tracing_enabled() -> bool:
    """Whether this process exports traces (configure_tracing ran with an endpoint)."""
    return _configured


def current_trace_parent() -> str:
    """The W3C traceparent of the current span, to store on a run; blank
    when tracing is off or nothing is being traced."""
    if not _configured:
        return ""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")


@contextmanager
def in_run_trace(trace_parent: str) -> Iterator[None]:
    """Send a run's step under the run's own trace. Inside that trace
    already (a step sending the next one) the current span stays the
    parent; from anywhere else (the sweeper, another run's step) the
    request that posted the run becomes the parent. A no-op for a run
    posted with tracing off."""
    if not trace_parent:
        yield
        return
    stored = _propagator.extract({"traceparent": trace_parent})
    run_trace = trace.get_current_span(stored).get_span_context()
    current = trace.get_current_span().get_span_context()
    if not run_trace.is_valid or (current.is_valid and current.trace_id == run_trace.trace_id):
        yield
        return
    token = context.attach(stored)
    try:
        yield
    finally:
        context.detach(token)
