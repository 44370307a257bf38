"""One ChatForge conversation per frontend chat, found by the history the
frontend sends again.

OpenAI clients keep the conversation themselves and send all of it with
every request; Open WebUI, LibreChat and the SDKs do. Without
``conversation_id`` each request became a new ChatForge conversation, so a
chat of ten turns in Open WebUI was ten conversations of one to ten
messages here. A request whose earlier messages are exactly the current branch of one
of the user's ``/v1`` conversations — the same system, user and assistant texts
in the same order, the assistant texts as ChatForge streamed them — now
continues that conversation: its new user message and answer are added
there, and the conversation's stored tool rounds (which the client never
saw) stay the model's history. Anything else (an edited or regenerated
turn, a stopped answer the client kept, a history with the client's own
tool calls, images or files) starts a new conversation, as before: a miss costs
nothing but the old behaviour (docs/decisions/0032-frontend-background-tasks-and-resent-history.md).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from chatforge.conversations.models import Conversation, Message, Run
from chatforge.conversations.selectors import message_tree_of

from .translate import ROUND_SEPARATOR, PriorMessage

# How many of the user's latest /v1 answers are compared with the request's
# last assistant message: a frontend continues its recent chats; an older
# one continued starts a new conversation.
CANDIDATE_ANSWERS = 20


def streamed_text(message: Message) -> str:
    """An assistant message's text as a ``/v1`` stream gave it: every model
    turn's text, the tool rounds' and the final one's, set apart by
    ``ROUND_SEPARATOR`` (openai_api/views._stream)."""
    texts = [rnd.get("assistant_response") or "" for rnd in message.tool_rounds or []]
    return ROUND_SEPARATOR.join(text for text in [*texts, message.content] if text)


def _same(prior: PriorMessage, stored: Message) -> bool:
    if prior.role != stored.role:
        return False
    if prior.role == Message.Role.ASSISTANT:
        return prior.content.strip() in (stored.content.strip(), streamed_text(stored).strip())
    return prior.content.strip() == stored.content.strip()


def conversation_for_history(user: AbstractBaseUser, prior: list[PriorMessage]) -> Conversation | None:
    """The user's ``/v1`` conversation whose messages are ``prior``, when it
    has no active run; else None."""
    if not any(m.role == Message.Role.ASSISTANT for m in prior):
        return None  # a first message: nothing to continue
    if any(m.tool_rounds or m.images or m.files for m in prior):
        return None
    last_answer = next(m for m in reversed(prior) if m.role == Message.Role.ASSISTANT).content.strip()
    answers = (
        Message.objects.filter(conversation__user=user, conversation__source=Conversation.Source.OPENAI,
                               role=Message.Role.ASSISTANT)
        .order_by("-created_at")[:CANDIDATE_ANSWERS]
    )
    seen: set = set()
    for answer in answers:
        if answer.conversation_id in seen or last_answer not in (answer.content.strip(),
                                                                 streamed_text(answer).strip()):
            continue
        seen.add(answer.conversation_id)
        conversation = Conversation.objects.filter(pk=answer.conversation_id).first()
        if conversation is None:
            continue
        # Its current branch: what the conversation's next message follows
        # (decision 0037); another branch's answer matching is not continued.
        stored = message_tree_of(conversation).current_branch(every_role=True)
        if len(stored) != len(prior) or not all(_same(p, s) for p, s in zip(prior, stored, strict=True)):
            continue
        if Run.objects.filter(conversation_id=answer.conversation_id).exclude(status__in=Run.TERMINAL).exists():
            return None  # still answering: a new conversation rather than a 409
        return conversation
    return None
