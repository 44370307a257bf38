"""The provider-neutral messages for an LLM turn: the conversation's path
to the run's user message (stored tool rounds expanded) plus this run's own
rounds up to now. Other branches of the conversation (earlier versions of
an edited message, other answers to it) never reach the model (decision 0037)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from chatforge.conversations.models import Message, Run
from chatforge.conversations.selectors import conversation_read, ledger_invocations_read, ledger_turns_read
from chatforge.conversations.tree import path_to
from chatforge.db.sql_rows import fetch_together, instances
from chatforge.llm.providers.base import ChatMessage
from chatforge.llm.providers.images import images_of
from orchestration.transcript.attachment_content import attached_content, with_attachments
from orchestration.transcript.rounds import expand_rounds, tool_rounds_from_ledger

FORCED_FINAL_NOTE = (
    "You have reached the limit of tool calls for this request. Answer the user now "
    "with the information gathered so far, without calling any tools."
)


def conversation_messages(run: Run, rows: list | None = None) -> list[ChatMessage]:
    """The path from the conversation's first message to the run's user
    message, that message included; ``rows``: its ``conversation_read``, if
    already made."""
    messages: list[ChatMessage] = []
    system_prompt = run.options.get("system_prompt") or settings.CHATFORGE_SYSTEM_PROMPT
    if system_prompt:
        messages.append(ChatMessage(role="system", content=system_prompt))
    if rows is None:
        rows = conversation_read(run.conversation_id).fetch()
    ordered = path_to([message for message, _ in rows], run.user_message_id)
    attached = attached_content(m for m in ordered if m.role == Message.Role.USER)
    for message in ordered:
        if message.role == Message.Role.ASSISTANT:
            messages.extend(expand_rounds(message.tool_rounds or []))
            if message.content:
                messages.append(ChatMessage(role="assistant", content=message.content))
        elif message.role == Message.Role.USER:
            files = attached.get(message.pk)
            images = images_of(message.content_json) + (files.images if files else ())
            messages.append(ChatMessage(role="user", content=with_attachments(message.content, files), images=images))
        elif message.role == Message.Role.SYSTEM:
            messages.append(ChatMessage(role="system", content=message.content))
    return messages


@dataclass(frozen=True)
class TurnInput:
    messages: list[ChatMessage]
    # Length of the text the run streamed in its earlier turns: where this
    # turn's text starts (tool calls carry their offset in the run's text).
    prior_text_length: int
    # Tool call ids the run has used so far (new calls must not reuse them).
    used_call_ids: frozenset[str]
    # The provider's id of this run's previous turn (Responses API continuation).
    last_response_id: str | None = None


def input_for_turn(run: Run, iteration: int, *, offer_tools: bool) -> TurnInput:
    if iteration > 0:  # the conversation and the run's ledger so far, in one round trip
        rows, turn_rows, invocation_rows = fetch_together(
            conversation_read(run.conversation_id),
            ledger_turns_read(run.pk, below_iteration=iteration),
            ledger_invocations_read(run.pk, below_iteration=iteration),
        )
    else:
        rows = conversation_read(run.conversation_id).fetch()
    messages = conversation_messages(run, rows)
    # A /v1 client's answer to an earlier run's calls of its own tools.
    messages.extend(expand_rounds(run.continued_rounds))
    prior_text_length = 0
    used_call_ids = frozenset(call["id"] for rnd in run.continued_rounds for call in rnd["tool_calls"])
    last_response_id: str | None = None
    if iteration > 0:
        turns, invocations = instances(turn_rows), instances(invocation_rows)
        messages.extend(expand_rounds(tool_rounds_from_ledger(turns, invocations)))
        prior_text_length = sum(len(t.text) for t in turns if t.status == "completed")
        used_call_ids |= frozenset(call["id"] for t in turns for call in t.tool_calls)
        completed = sorted((t for t in turns if t.status == "completed"), key=lambda t: t.iteration)
        if completed and completed[-1].response_id:
            last_response_id = completed[-1].response_id
    if not offer_tools and iteration > 0:
        messages.append(ChatMessage(role="system", content=FORCED_FINAL_NOTE))
    return TurnInput(messages, prior_text_length, used_call_ids, last_response_id)
