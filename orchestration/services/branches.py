"""Versions of a conversation (decision 0037): messages form a tree, and a
person moves through it. An answer regenerated is a new run for the same
user message (``runs.run_answer_again``); switching versions moves the
conversation's current leaf; deleting a message deletes the branch below it.

Each refuses while a run of the conversation (or, for a delete, of the
branch) is in progress: the run's answer would land on a branch the person
has just left, or under a message that is gone.
"""

from __future__ import annotations

import logging
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from redis.exceptions import RedisError

from chatforge.conversations import tree
from chatforge.conversations.models import Conversation, Message, Run
from chatforge.errors import InvalidRequest, RunActive
from orchestration.event_log import get_event_log

from .runs import ACTIVE, RunOptions, run_answer_again

logger = logging.getLogger(__name__)


def regenerate(*, user: AbstractBaseUser, message: Message, options: RunOptions, idempotency_key: str = "") -> Run:
    """Answer again the user message ``message`` is (or answers, for an
    assistant message): a new run, whose answer is another version beside
    the earlier ones."""
    asked = message
    if message.role == Message.Role.ASSISTANT:
        asked_id = Run.objects.filter(pk=message.run_id).values_list("user_message_id", flat=True).first() \
            if message.run_id else message.parent_id
        asked = Message.objects.select_related("conversation").filter(
            pk=asked_id, conversation_id=message.conversation_id, role=Message.Role.USER).first()
        if asked is None:
            raise InvalidRequest("This answer's question is no longer stored, so it cannot be answered again.",
                                 details={"message_id": str(message.pk)})
    elif message.role != Message.Role.USER:
        raise InvalidRequest("Only a user message or an assistant's answer can be regenerated.",
                             details={"message_id": str(message.pk)})
    return run_answer_again(user=user, message=asked, options=options, idempotency_key=idempotency_key)


def _lock_idle(conversation: Conversation, *, doing: str) -> list[Message]:
    """Lock the conversation's row (posts wait for it: ``runs._run_create``)
    and refuse while it has a run in progress; its messages' tree."""
    Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("id").first()
    active = Run.objects.filter(conversation=conversation, status__in=ACTIVE).values_list("id", flat=True).first()
    if active is not None:
        raise RunActive(
            f"This conversation has a run in progress ({active}); wait for it or cancel it before {doing}.",
            details={"active_run_id": str(active)},
        )
    return list(Message.objects.filter(conversation=conversation).only("id", "parent_id", "role", "created_at"))


def switch_branch(*, conversation: Conversation, message_id: UUID | str) -> UUID:
    """Make the branch through ``message_id`` the conversation's current
    one (its current leaf); returns the leaf."""
    with transaction.atomic():
        nodes = _lock_idle(conversation, doing="switching versions")
        leaf = next((node.pk for node in nodes if str(node.pk) == str(message_id)), None)
        if leaf is None:
            raise InvalidRequest("message_id must be the id of one of this conversation's messages.",
                                 details={"field": "message_id"})
        Conversation.objects.filter(pk=conversation.pk).update(current_leaf=leaf)
    conversation.current_leaf = leaf
    return leaf


def delete_message(*, message: Message) -> None:
    """Delete ``message`` and every message below it, with the runs that
    answered them (their ledgers go with them, and their event logs once
    the delete commits). Files attached to them stay the user's, free to be
    attached again. The current leaf moves to the message's parent when it
    was in the deleted branch."""
    conversation = message.conversation
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("id").first()
        nodes = list(Message.objects.filter(conversation=conversation).only("id", "parent_id", "role", "created_at"))
        doomed = tree.subtree_ids(nodes, message.pk)
        runs = list(Run.objects.filter(user_message_id__in=doomed).values_list("id", "status"))
        active = next((run_id for run_id, run_status in runs if run_status in ACTIVE), None)
        if active is not None:
            raise RunActive(
                f"A run of this branch is in progress ({active}); wait for it or cancel it before deleting "
                "the message.",
                details={"active_run_id": str(active)},
            )
        # Runs first: a message's deletion would cascade to them anyway, but
        # deleting them by id keeps the assistant messages' SET_NULL of their
        # run from being a second pass over the same rows.
        Run.objects.filter(pk__in=[run_id for run_id, _ in runs]).delete()
        Message.objects.filter(pk__in=doomed).delete()
        current = Conversation.objects.filter(pk=conversation.pk).values_list("current_leaf", flat=True).first()
        if current in set(doomed):
            Conversation.objects.filter(pk=conversation.pk).update(current_leaf=message.parent_id)
        run_ids = [str(run_id) for run_id, _ in runs]
        transaction.on_commit(lambda: _drop_event_logs(run_ids))


def _drop_event_logs(run_ids: list[str]) -> None:
    """The deleted runs' event logs (they would only expire otherwise; a
    reader of one now finds no run). An unreachable log keeps them until
    they expire: the rows, the source of truth, are gone already."""
    log = get_event_log()
    for run_id in run_ids:
        try:
            log.delete(run_id)
        except (RedisError, OSError) as exc:
            logger.warning("event log of deleted run %s not dropped: %s", run_id, exc)
