"""SQL statements per engine step, counted, with a budget each.

Each step's statements are counted with ``CaptureQueriesContext`` around the
Celery task run in this process (Postgres, as in production; the tool
catalog cached as workers cache it). A step that goes above its budget
fails here, so statements removed from the hot path stay removed. When a
change lowers a count, lower the budget with it (docs/performance.md
records the history).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatforge.conversations.models import Conversation, ToolInvocation
from chatforge.scheduling.limits import forget_cached_limits
from orchestration import tasks
from orchestration.services.runs import RunOptions, run_start
from tests.fakes.openai_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

# Statements per step, BEGIN and COMMIT included.
BUDGET = {
    "first model turn (asks for a tool)": 3,
    "tool call (and the fan-in that creates the next turn)": 2,
    "last model turn (and finalize)": 11,
}


def _statements(step) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        step()
    return [query["sql"] for query in queries.captured_queries]


def test_each_step_stays_within_its_statement_budget(settings, fake_llm, idle_broker, make_user):
    settings.OPENAI_BASE_URL = fake_llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.CHATFORGE_TOOL_CATALOG_TTL_S = 60  # as in production: a worker caches the catalog
    settings.CHATFORGE_LIMITS_TTL_S = 60  # ...and the scheduling limits (warmed by the first run)
    forget_cached_limits()
    fake_llm.add_script("budget", [Reply(text="Checking.", tool_calls=[("echo", {"text": "a"})]),
                                   Reply(text="Done.")])
    user, _ = make_user()
    counted = {}
    for attempt in range(2):  # the first run warms the caches, the second is counted
        run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                        options=RunOptions(model="budget"))
        run_id = str(run.id)
        first = _statements(lambda: tasks.llm_turn(run_id, 0))
        call = ToolInvocation.objects.get(run_id=run_id)
        tool = _statements(lambda: tasks.tool_call(run_id, call.tool_call_id))
        last = _statements(lambda: tasks.llm_turn(run_id, 1))
        run.refresh_from_db()
        assert run.status == "completed"
        counted = dict(zip(BUDGET, (first, tool, last), strict=True))
    over = {step: len(sql) for step, sql in counted.items() if len(sql) > BUDGET[step]}
    assert not over, "\n".join(f"{step}: {len(counted[step])} statements (budget {BUDGET[step]}):\n  "
                               + "\n  ".join(sql[:120] for sql in counted[step]) for step in over)


# token, conversation, then BEGIN, conversation lock, active runs, the conversation's tree (where the
# message goes: in the same round trip as the two before it), the 3 rows and the current leaf in 1 statement, COMMIT
POST_BUDGET = 8


def test_posting_a_message_stays_within_its_statement_budget(settings, idle_broker, make_user):
    from rest_framework.test import APIClient

    settings.CHATFORGE_TOOL_CATALOG_TTL_S = 60
    settings.CHATFORGE_LIMITS_TTL_S = 60  # the limits cache is warmed by the first POST
    forget_cached_limits()
    user, token = make_user()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    counted: list[str] = []
    for attempt in range(2):  # the first warms the caches (and writes the token's last use)
        conversation = Conversation.objects.create(user=user)
        with CaptureQueriesContext(connection) as queries:
            response = api.post(f"/api/conversations/{conversation.id}/messages/", {"content": "hi"}, format="json")
        assert response.status_code == 202, response.content
        counted = [query["sql"] for query in queries.captured_queries]
    assert len(counted) <= POST_BUDGET, f"{len(counted)} statements (budget {POST_BUDGET}):\n  " + "\n  ".join(
        sql[:120] for sql in counted)
