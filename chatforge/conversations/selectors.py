"""Reads, always scoped to the user who asks."""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, QuerySet

from chatforge.db.sql_rows import Read, as_uuid, columns, db_param, fetch_models

from .models import Conversation, LlmTurn, Message, Run, ToolInvocation


def conversations_of(
    user: AbstractBaseUser, *, source: str | None = None, search: str | None = None
) -> QuerySet[Conversation]:
    """The user's conversations; only those of one ``Conversation.Source``,
    and only those whose title or any message contains ``search``
    (case-insensitive substring: what people expect of a sidebar search),
    if given."""
    conversations = Conversation.objects.filter(user=user)
    if source is not None:
        conversations = conversations.filter(source=source)
    if search:
        matching = Message.objects.filter(conversation_id=models.OuterRef("pk"), content__icontains=search)
        conversations = conversations.filter(Q(title__icontains=search) | Q(models.Exists(matching)))
    return conversations


def conversation_of(user: AbstractBaseUser, conversation_id) -> Conversation | None:
    """The user's conversation with this id, or None (also for malformed
    ids). Fixed SQL: every message posted reads it first (``chatforge.db.sql_rows``)."""
    return _owned(Conversation, user, conversation_id)


def _ordered_sql(roles) -> str:
    message, run = Message._meta.db_table, Run._meta.db_table
    role_filter = f'AND m."role" IN ({", ".join(["%s"] * len(roles))})' if roles is not None else ""
    # The user message each assistant message answers (its run's), for the
    # ordering below; fixed SQL, not a queryset: this read is made on every
    # model turn, and compiling the ORM's equivalent cost more than running it.
    return f"""SELECT {columns(Message, "m")}, r."user_message_id"
               FROM {message} m LEFT JOIN {run} r ON r."id" = m."run_id"
               WHERE m."conversation_id" = %s {role_filter}"""


def conversation_read(conversation_id, *, roles=None) -> Read:
    """A conversation's messages, each with the id of the user message it
    answers, for ``in_conversation_order``."""
    return Read(Message, _ordered_sql(roles), [db_param(Message, "conversation", conversation_id), *(roles or [])])


def ordered_messages(conversation_id, *, before: Message | None = None, roles=None) -> list[Message]:
    """The conversation's messages in conversation order; with ``before``,
    only those that come before that user message's answer."""
    return in_conversation_order(conversation_read(conversation_id, roles=roles).fetch(), before=before)


def in_conversation_order(rows: list[tuple[Message, tuple]], *, before: Message | None = None) -> list[Message]:
    """The rows of ``conversation_read`` in conversation order; with
    ``before``, only those that come before that user message's answer.

    Conversation order: an assistant message right after the user message
    of its run, whenever it was written (with double-texting, a later user
    message can be stored before the previous run's answer)."""
    # Each message with the id of the user message it answers (its run's).
    answering = [(message, as_uuid(answers)) for message, (answers,) in rows]
    created = {message.pk: message.created_at for message, _ in answering}

    def position(message: Message, answers: UUID | None) -> tuple:
        if message.role == Message.Role.ASSISTANT and answers in created:
            return (created[answers], 1, message.created_at)
        return (message.created_at, 0, message.created_at)

    keyed = sorted(((position(m, answers), m, answers) for m, answers in answering), key=lambda item: item[0])
    if before is not None:
        limit = (before.created_at, 1, before.created_at)
        keyed = [item for item in keyed if item[0] < limit and item[2] != before.pk]
    return [message for _, message, _ in keyed]


def messages_of(conversation: Conversation) -> list[Message]:
    return ordered_messages(conversation.id, roles=[Message.Role.USER, Message.Role.ASSISTANT])


def runs_of(user: AbstractBaseUser) -> QuerySet[Run]:
    return Run.objects.filter(user=user)


def run_of(user: AbstractBaseUser, run_id: str) -> Run | None:
    """The user's run with this id, or None (also for malformed ids). Fixed
    SQL: every run socket and SSE stream starts with it (``chatforge.db.sql_rows``)."""
    return _owned(Run, user, run_id)


def _owned(model, user: AbstractBaseUser, pk):
    """The row of ``model`` with this primary key if ``user`` owns it, else
    None (also for malformed keys: "not found", not a server error)."""
    try:
        key = db_param(model, "pk", pk)
    except (ValueError, ValidationError):
        return None
    found = fetch_models(model, f'SELECT {columns(model, "o")} FROM {model._meta.db_table} o '
                                'WHERE o."id" = %s AND o."user_id" = %s', [key, user.pk])
    return found[0] if found else None


def ledger_turns_read(run_id, *, below_iteration: int | None = None, completed_only: bool = False) -> Read:
    """A run's model turns by iteration (fixed SQL: read on every turn after
    the first and at finalize; see ``chatforge.db.sql_rows``)."""
    sql = f'SELECT {columns(LlmTurn, "t")} FROM {LlmTurn._meta.db_table} t WHERE t."run_id" = %s'
    params: list = [db_param(LlmTurn, "run", run_id)]
    if below_iteration is not None:
        sql += ' AND t."iteration" < %s'
        params.append(below_iteration)
    if completed_only:
        sql += " AND t.\"status\" = 'completed'"
    return Read(LlmTurn, sql + ' ORDER BY t."iteration"', params)


def ledger_invocations_read(run_id, *, below_iteration: int | None = None) -> Read:
    """A run's tool calls in round order (fixed SQL, as ``ledger_turns_read``)."""
    sql = f'SELECT {columns(ToolInvocation, "i")} FROM {ToolInvocation._meta.db_table} i WHERE i."run_id" = %s'
    params: list = [db_param(ToolInvocation, "run", run_id)]
    if below_iteration is not None:
        sql += ' AND i."iteration" < %s'
        params.append(below_iteration)
    return Read(ToolInvocation, sql + ' ORDER BY i."iteration", i."position"', params)
