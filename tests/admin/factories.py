"""Rows for admin tests: runs with a full ledger, and many of each kind of
row for the query-count checks. Rows are created directly (no engine), as
the admin only reads them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from chatforge.accounts.secrets import user_secret_set
from chatforge.accounts.tokens import api_token_create
from chatforge.catalog.models import Assistant, ToolDefinition
from chatforge.conversations.models import Conversation, LlmTurn, Message, Run, ToolInvocation
from chatforge.llm.models import LanguageModel, ModelValidation, Provider

User = get_user_model()


def make_user(username: str) -> Any:
    return User.objects.create_user(username=username)  # no password: hashing one is slow


def make_traced_run(user: Any, *, title: str = "Maths and time") -> Run:
    """A completed two-round run: the model calls calculator and echo, then answers."""
    now = timezone.now()
    conversation = Conversation.objects.create(user=user, title=title)
    question = Message.objects.create(conversation=conversation, role="user", content="What is 6*7? Say hi too.")
    run = Run.objects.create(
        conversation=conversation, user=user, user_message=question, status=Run.Status.COMPLETED,
        model="demo", iteration=1, options={"tools": ["calculator", "echo"], "max_iterations": 10},
        usage={"input_tokens": 120, "output_tokens": 30}, finish_reason="stop",
    )
    Run.objects.filter(pk=run.pk).update(
        created_at=now - timedelta(seconds=3), started_at=now - timedelta(seconds=2.9), finished_at=now
    )
    LlmTurn.objects.create(
        run=run, iteration=0, status="completed", text="Let me work that out.",
        reasoning="The user wants a product and a greeting.", finish_reason="tool_calls",
        tool_calls=[{"id": "call_calc", "name": "calculator", "arguments": '{"expression": "6*7"}'},
                    {"id": "call_echo", "name": "echo", "arguments": '{"text": "hi"}'}],
        provider_ms=850, deliveries=1, usage={"input_tokens": 60, "output_tokens": 20},
        started_at=now - timedelta(seconds=2.9), finished_at=now - timedelta(seconds=2),
    )
    ToolInvocation.objects.create(
        run=run, tool_call_id="call_calc", iteration=0, position=0, name="calculator",
        arguments='{"expression": "6*7"}', status="success", output=json.dumps({"result": 42}),
        result={"success": True, "result": {"result": 42}}, attempts=1, deliveries=1, duration_ms=3,
    )
    ToolInvocation.objects.create(
        run=run, tool_call_id="call_echo", iteration=0, position=1, name="echo",
        arguments='{"text": "hi"', status="error", attempts=2, deliveries=1, duration_ms=12,
        output="Error: Invalid JSON in tool arguments. Please check the JSON syntax and try again.",
        error="upstream answered 503 on attempt 1",
    )
    LlmTurn.objects.create(
        run=run, iteration=1, status="completed", text="6*7 is 42. Hi!", finish_reason="stop",
        provider_ms=400, deliveries=1, started_at=now - timedelta(seconds=1), finished_at=now,
    )
    Message.objects.create(
        conversation=conversation, run=run, role="assistant", content="6*7 is 42. Hi!", model="demo", parent=question,
        tool_rounds=[{"assistant_response": "Let me work that out.", "tool_calls": [], "results": []}],
    )
    run.refresh_from_db()
    return run


def make_many(kind: str, count: int, *, offset: int = 0) -> None:
    """``count`` more rows of ``kind`` (with their related rows), for changelist query counts."""
    for i in range(offset, offset + count):
        if kind == "run":
            make_traced_run(make_user(f"runner{i}"), title=f"conversation {i}")
        elif kind == "token":
            api_token_create(user=make_user(f"holder{i}"), name=f"token {i}")
        elif kind == "secret":
            user_secret_set(user=make_user(f"keeper{i}"), name="weather_key", value=f"value-{i}")
        elif kind == "model":
            provider = Provider.objects.create(name=f"provider-{i}", kind="openai")
            LanguageModel.objects.create(name=f"model-{i}", provider=provider)
            ModelValidation.objects.create(model=f"model-{i}", query="time?", success=i % 2 == 0, tool_calls=1)
        elif kind == "tool":
            ToolDefinition.objects.create(
                name=f"mock_{i}", description="A mock.", kind="mock",
                parameters={"type": "object", "properties": {}}, mock_response={"i": i},
            )
            Assistant.objects.create(name=f"assistant-{i}", tools=["echo"])
        else:
            raise ValueError(kind)
