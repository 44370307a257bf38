"""A run's steps are sent under the run's own trace (``in_run_trace``).

The spans come from a tracer provider of the test's own (not the process's
global one), so nothing here turns tracing on for other tests."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from chatforge.observability.tracing import current_trace_parent, in_run_trace

tracer = TracerProvider().get_tracer("test")


def traceparent_of(span: trace.Span) -> str:
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, trace.set_span_in_context(span))
    return carrier["traceparent"]


def current() -> trace.SpanContext:
    return trace.get_current_span().get_span_context()


def posted_run() -> tuple[trace.Span, str]:
    """The request that posted a run (ended), and the traceparent the run keeps."""
    with tracer.start_as_current_span("POST /api/conversations/…/messages/") as request:
        return request, traceparent_of(request)


def test_a_step_sent_from_another_trace_is_sent_under_the_request_that_posted_the_run():
    request, stored = posted_run()
    with tracer.start_as_current_span("run/chatforge.sweep_stalled_runs") as sweep:
        with in_run_trace(stored):
            assert current().trace_id == request.get_span_context().trace_id
            assert current().span_id == request.get_span_context().span_id
        assert current().span_id == sweep.get_span_context().span_id  # restored after the send


def test_a_step_sent_by_a_step_of_the_same_run_keeps_that_step_as_its_parent():
    request, stored = posted_run()
    with tracer.start_as_current_span("run/chatforge.llm_turn", context=trace.set_span_in_context(request)) as turn:
        with in_run_trace(stored):
            assert current().span_id == turn.get_span_context().span_id


def test_a_step_sent_with_nothing_traced_is_sent_under_the_run():
    request, stored = posted_run()
    with in_run_trace(stored):
        assert current().trace_id == request.get_span_context().trace_id
    assert not current().is_valid


def test_a_run_posted_with_tracing_off_changes_nothing():
    with tracer.start_as_current_span("run/chatforge.sweep_stalled_runs") as sweep:
        for stored in ("", "not a traceparent"):
            with in_run_trace(stored):
                assert current().span_id == sweep.get_span_context().span_id


def test_with_tracing_off_a_run_stores_no_traceparent():
    with tracer.start_as_current_span("POST"):
        assert current_trace_parent() == ""
