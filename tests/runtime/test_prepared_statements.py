"""The engine's fixed SQL is prepared on the server (Postgres): each text is
parsed and planned once per connection, not on every step; the ORM's own
queries are not; ``DATABASE_PREPARED_STATEMENTS=false`` turns it off; and
Django still sees every statement (query logging, the statement budgets)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatforge.conversations.models import Conversation, Run
from chatforge.db.sql_rows import fixed_sql_cursor
from orchestration.services.claims import claim_turn
from orchestration.services.runs import RunOptions, run_start

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are Postgres'"),
]

PROBE = "SELECT count(*) FROM conversations_run WHERE status = %s"
OFF_PROBE = "SELECT count(*) FROM conversations_run WHERE model = %s"


def prepared_texts() -> list[str]:
    with connection.cursor() as cursor:  # the ORM's cursor: not itself prepared
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_fixed_statement_is_prepared_once_and_reused():
    for _ in range(3):
        with fixed_sql_cursor() as cursor:
            cursor.execute(PROBE, ["running"])
            assert cursor.fetchone() == (0,)
    texts = prepared_texts()
    assert texts.count("SELECT count(*) FROM conversations_run WHERE status = $1") == 1
    assert not any("pg_prepared_statements" in text for text in texts)


def test_the_orm_does_not_prepare():
    list(Run.objects.filter(status="running").only("id"))
    # The ORM's statement, as it writes it; nothing prepared matches it.
    assert not any('"conversations_run"."status"' in text for text in prepared_texts())


def test_switched_off_nothing_is_prepared(settings):
    settings.DATABASE_PREPARED_STATEMENTS = False
    with fixed_sql_cursor() as cursor:
        cursor.execute(OFF_PROBE, ["gpt-4o"])
    assert not any("model = $1" in text for text in prepared_texts())


def test_prepared_statements_are_still_seen_by_django():
    with CaptureQueriesContext(connection) as captured, fixed_sql_cursor() as cursor:
        cursor.execute(PROBE, ["queued"])
    assert [query["sql"] for query in captured.captured_queries] == [PROBE % "'queued'"]


def test_a_step_claim_is_prepared(django_user_model, settings):
    settings.OPENAI_API_KEY = "test-key"
    user = django_user_model.objects.create_user("prepared")
    run = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                    options=RunOptions(model="gpt-4o-mini"))
    assert claim_turn(str(run.pk), 0) is not None
    assert any(text.lstrip().startswith("WITH claimed AS") for text in prepared_texts())
