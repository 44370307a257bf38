"""The run and its step ledger: Postgres is the only source of truth.

Every Celery task is a pure function of ``(run_id, step)`` plus these rows. A
step row is created by whoever decides the step should happen (in the same
transaction as that decision), claimed by the task that runs it, and
completed with a conditional write, so a step delivered twice is a no-op.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
    # Not a column: set on the instance ``run_start`` returns when an
    # Idempotency-Key matched an earlier run (the request is a repeat).
    replayed: bool = False

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="runs"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    user_message = models.ForeignKey(
        "conversations.Message", on_delete=models.CASCADE, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    model = models.CharField(max_length=200)
    # The LLM turn the run is at (0-based). Tool rounds happen between turns.
    iteration = models.IntegerField(default=0)
    # Tool calls of the current round not yet recorded. Set when a turn
    # records its calls; each recorded call takes one off in a single
    # UPDATE, and the one that takes it to 0 starts the next turn (the
    # fan-in: orchestration/services/tool_steps.py).
    pending_tool_calls = models.IntegerField(default=0)
    # Request options: tools (names), max_iterations, reasoning_effort, ...
    options = models.JSONField(default=dict, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Double-texting: a run posted while another was active waits for it
    # (on_active=enqueue or interrupt) and is dispatched when it ends.
    blocked_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="waiting_runs")
    error = models.TextField(blank=True)
    # What kind of failure ended a failed run when its model's provider
    # refused (chatforge.llm.providers.base.ErrorKind: "not_found",
    # "authentication", ...); blank otherwise. Lets an API answer a run that
    # failed because the model does not exist as the client's error (404),
    # not as ours.
    error_kind = models.CharField(max_length=32, blank=True, default="")
    finish_reason = models.CharField(max_length=32, blank=True)
    max_iterations_reached = models.BooleanField(default=False)
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Touched by every step; the sweeper re-enqueues runs whose heartbeat is
    # stale. Cleared (NULL) when enqueueing the run's next step failed (broker
    # unreachable): the sweeper's next pass sends it again.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The client's Idempotency-Key header: a repeated request with the same
    # key (same user) gets this run back instead of starting another.
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    # The tool rounds this run carries on from, before its own first turn: a
    # /v1 client's answer to the calls an earlier run made to the client's
    # own tools (compact rounds, as on ``Message.tool_rounds``; docs/decisions/
    # 0016-client-tools-end-the-run.md). Empty for every other run.
    continued_rounds = models.JSONField(default=list, blank=True)
    # The W3C traceparent of the request that posted the run (blank when
    # tracing is off): a step sent from outside the run's own trace — by the
    # sweeper, by the run it waited behind, from fair scheduling's line — is
    # sent under it, so one run stays one trace (observability/tracing.py).
    trace_parent = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["conversation", "-created_at"], name="run_conv_created"),
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="one_run_per_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class StepStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"


class LlmTurn(models.Model):
    """One call of the model within a run (memoised: never repeated once done)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="turns")
    iteration = models.IntegerField()
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    offered_tools = models.BooleanField(default=True)
    text = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    reasoning_details = models.JSONField(null=True, blank=True)  # provider reasoning blocks
    tool_calls = models.JSONField(default=list, blank=True)  # [{id, name, arguments, metadata?}]
    finish_reason = models.CharField(max_length=32, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    response_id = models.CharField(max_length=200, blank=True)
    # Time spent waiting on the provider (the rest of the step is our overhead).
    provider_ms = models.IntegerField(null=True, blank=True)
    deliveries = models.IntegerField(default=0)
    # The Celery worker node (name@host) of the latest delivery: which host
    # of the fleet ran the step, for operators and the scale-out test.
    worker = models.CharField(max_length=255, blank=True)
    # The worker process of the latest delivery, by its name in the liveness
    # registry (chatforge/workers/liveness.py): when that process is lost,
    # the steps it claimed are found by it (orchestration/services/lost_workers.py).
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    # The lease of the delivery running this step, renewed while it runs.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "iteration"]
        constraints = [
            models.UniqueConstraint(fields=["run", "iteration"], name="one_turn_per_iteration")
        ]
        indexes = [
            # A lost worker's running steps (lost_workers.py): only the few running rows.
            models.Index(fields=["lease_owner"], name="turn_running_owner", condition=models.Q(status="running")),
        ]


class ToolInvocation(models.Model):
    """One tool call of one round; ``(run, tool_call_id)`` is its identity."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCESS = "success"
        ERROR = "error"
        TIMEOUT = "timeout"
        CANCELLED = "cancelled"
        # A call to a tool the /v1 client defined: never run here. The run
        # ends with it (finish_reason "tool_calls") and the client's result
        # comes with its next request, which starts a run that continues.
        CLIENT = "client"
        # The tool needs a person's approval first: not enqueued, no worker
        # waits. The run's owner decides (orchestration/services/approvals.py);
        # approve → pending and enqueued, deny or expiry → an error result.
        AWAITING_APPROVAL = "awaiting_approval"

    class Decision(models.TextChoices):
        APPROVE = "approve"
        DENY = "deny"

    FINISHED = (Status.SUCCESS, Status.ERROR, Status.TIMEOUT, Status.CANCELLED)
    # Nothing more will happen to these in this run: what a round waits for is the rest.
    SETTLED = (*FINISHED, Status.CLIENT)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_invocations")
    tool_call_id = models.CharField(max_length=128)
    iteration = models.IntegerField()
    position = models.IntegerField(default=0)  # order within the round
    name = models.CharField(max_length=128)
    arguments = models.TextField(blank=True)  # raw JSON text as the model sent it
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PENDING)
    output = models.TextField(blank=True)  # what the model is given
    result = models.JSONField(null=True, blank=True)  # executor result dict
    error = models.TextField(blank=True)
    attempts = models.IntegerField(default=0)
    deliveries = models.IntegerField(default=0)
    # The Celery worker node (name@host) of the latest delivery: which host
    # of the fleet ran the step, for operators and the scale-out test.
    worker = models.CharField(max_length=255, blank=True)
    # The worker process of the latest delivery, by its name in the liveness
    # registry (chatforge/workers/liveness.py): when that process is lost,
    # the steps it claimed are found by it (orchestration/services/lost_workers.py).
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    # The lease of the delivery running this step, renewed while it runs.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.IntegerField(null=True, blank=True)
    text_offset = models.IntegerField(default=0)
    # Approval (only for tools that require it): when the request lapses,
    # and who decided what, when and why. ``approval_decided_by`` is NULL with
    # a decision when the server decided (the request expired, or /v1 could
    # not ask).
    approval_expires_at = models.DateTimeField(null=True, blank=True)
    approval_decision = models.CharField(max_length=8, choices=Decision.choices, blank=True)
    approval_reason = models.TextField(blank=True)
    approval_decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approval_decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "iteration", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="one_invocation_per_call")
        ]
        indexes = [
            models.Index(fields=["run", "iteration", "status"], name="inv_run_iter_status"),
            # The sweeper's expiry pass: only the few rows that await approval.
            models.Index(fields=["approval_expires_at"], name="inv_awaiting_approval",
                         condition=models.Q(status="awaiting_approval")),
            # A lost worker's running calls (lost_workers.py).
            models.Index(fields=["lease_owner"], name="inv_running_owner", condition=models.Q(status="running")),
        ]

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED
