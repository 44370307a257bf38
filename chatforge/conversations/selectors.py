"""Reads, always scoped to the user who asks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, QuerySet

from chatforge.db.sql_rows import Read, as_uuid, columns, db_param, fetch_models, instances

from . import tree
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


def conversation_read(conversation_id) -> Read:
    """Every message of a conversation, in no order (the tree's functions
    order them: ``chatforge.conversations.tree``). Fixed SQL, not a
    queryset: this read is made on every model turn, and compiling the
    ORM's equivalent cost more than running it."""
    sql = f'SELECT {columns(Message, "m")} FROM {Message._meta.db_table} m WHERE m."conversation_id" = %s'
    return Read(Message, sql, [db_param(Message, "conversation", conversation_id)])


def tree_nodes_read(conversation_id) -> Read:
    """The conversation's messages' places in the tree, without their text:
    what a POST needs to find where its message goes (rows of
    ``(None, (id, parent_id, role, created_at))``; ``tree_nodes``)."""
    sql = (f'SELECT "id", "parent_id", "role", "created_at" FROM {Message._meta.db_table} '
           'WHERE "conversation_id" = %s')
    return Read(None, sql, [db_param(Message, "conversation", conversation_id)])


def tree_nodes(rows) -> list[tree.Node]:
    """The rows of ``tree_nodes_read`` as ``tree.Node``."""
    return [tree.Node(as_uuid(pk), as_uuid(parent), role, created) for _, (pk, parent, role, created) in rows]


SHOWN_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


@dataclass(frozen=True)
class MessageTree:
    """A conversation's messages, every branch."""

    every: list[Message]  # every role, by (created_at, id)
    current_leaf: UUID | None

    @property
    def messages(self) -> list[Message]:
        """The user and assistant messages (what the API and the page show)."""
        return [m for m in self.every if m.role in SHOWN_ROLES]

    def current_branch(self, *, every_role: bool = False) -> list[Message]:
        """The branch the person last chose: root to ``current_leaf``, then
        on by the newest child (``tree.branch_through``); its user and
        assistant messages, or all of them (a /v1 client's system messages too)."""
        branch = tree.branch_through(self.every, self.current_leaf)
        return branch if every_role else [m for m in branch if m.role in SHOWN_ROLES]

    def sibling_ids(self) -> dict[UUID, list[UUID]]:
        return tree.sibling_ids(self.every)


def message_tree_of(conversation: Conversation) -> MessageTree:
    """Every message of the conversation (``?tree=1``, and what the current
    branch and the siblings are computed from)."""
    return MessageTree(tree.in_tree_order(instances(conversation_read(conversation.pk).fetch())),
                       conversation.current_leaf)


def messages_of(conversation: Conversation) -> list[Message]:
    """The conversation's current branch, in order: what the page shows,
    what an export or a share holds, what the next message continues."""
    return message_tree_of(conversation).current_branch()


def message_of(user: AbstractBaseUser, message_id) -> Message | None:
    """The message with this id in one of the user's conversations, or
    None (also for malformed ids)."""
    try:
        key = db_param(Message, "pk", message_id)
    except (ValueError, ValidationError):
        return None
    return Message.objects.select_related("conversation").filter(pk=key, conversation__user=user).first()


def run_assistants(messages: Sequence[Message]) -> dict[UUID, str]:
    """The assistant profile each assistant message's run used
    (``Run.options["assistant"]``), by message id; none for the others."""
    runs = {m.run_id: m.pk for m in messages if m.role == Message.Role.ASSISTANT and m.run_id}
    if not runs:
        return {}
    named = Run.objects.filter(pk__in=list(runs)).values_list("id", "options__assistant")
    return {runs[run_id]: name for run_id, name in named if isinstance(name, str) and name}


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
