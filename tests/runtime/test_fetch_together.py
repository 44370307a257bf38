"""``fetch_together`` sends a step's independent reads in one round trip
(psycopg's pipeline mode on Postgres) and gives the same rows as reading
them one by one; Django still sees each statement, and errors are Django's."""

from __future__ import annotations

import pytest
from django.db import ProgrammingError, connection
from django.test.utils import CaptureQueriesContext

from chatforge.conversations.models import Conversation
from chatforge.db.sql_rows import Read, columns, fetch_together

pytestmark = pytest.mark.django_db(transaction=True)


def conversation_with_clock(conversation_id) -> Read:
    """The conversation and the time its statement's transaction began."""
    return Read(Conversation, f'SELECT {columns(Conversation, "c")}, now() FROM conversations_conversation c '
                              'WHERE c."id" = %s', [conversation_id])


@pytest.fixture
def conversations(django_user_model) -> list[Conversation]:
    user = django_user_model.objects.create_user(username="reader", password="x")
    return [Conversation.objects.create(user=user, title=f"c{i}") for i in range(3)]


def test_the_rows_are_those_of_each_read_alone(conversations):
    reads = [conversation_with_clock(c.pk) for c in conversations]
    together = fetch_together(*reads)
    alone = [read.fetch() for read in reads]
    assert [[(row.pk, row.title) for row, _ in rows] for rows in together] == \
        [[(row.pk, row.title) for row, _ in rows] for rows in alone] == [[(c.pk, c.title)] for c in conversations]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pipeline mode is Postgres'")
def test_on_postgres_they_are_sent_together(conversations):
    """Sent before any result is read, with one Sync: one implicit
    transaction, so one clock; read one by one, each has its own."""
    reads = [conversation_with_clock(c.pk) for c in conversations]
    together = {extra[0] for rows in fetch_together(*reads) for _, extra in rows}
    alone = {extra[0] for read in reads for _, extra in read.fetch()}
    assert len(together) == 1
    assert len(alone) == 3


def test_django_sees_each_statement(conversations):
    with CaptureQueriesContext(connection) as captured:
        fetch_together(*(conversation_with_clock(c.pk) for c in conversations))
    assert len(captured.captured_queries) == 3


def test_a_failing_read_raises_djangos_error_and_the_connection_goes_on(conversations):
    broken = Read(Conversation, "SELECT * FROM no_such_table", [])
    with pytest.raises(ProgrammingError):
        fetch_together(conversation_with_clock(conversations[0].pk), broken)
    (rows,) = fetch_together(conversation_with_clock(conversations[1].pk))
    assert rows[0][0].pk == conversations[1].pk
