"""Starting a run: the user's message and the run are written in one
transaction, and the first model turn is enqueued only after it commits."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from chatforge.catalog import versioning as catalog_versioning
from chatforge.catalog.catalog import get_catalog
from chatforge.catalog.models import Assistant
from chatforge.conversations import tree
from chatforge.conversations.models import Conversation, LlmTurn, Message, Run
from chatforge.conversations.selectors import tree_nodes, tree_nodes_read
from chatforge.db.sql_rows import (
    Read,
    as_uuid,
    db_param,
    fetch_together,
    insert_statement,
    mark_saved,
    update_statement,
    write_together,
)
from chatforge.errors import (
    IdempotencyKeyReused,
    InvalidRequest,
    RunActive,
    TokenBudgetExhausted,
    TooManyActiveRuns,
    UnknownTool,
)
from chatforge.files.message_parts import attached_file_ids
from chatforge.files.models import StoredFile
from chatforge.llm.resolution import DEMO_MODEL
from chatforge.llm.providers.images import content_parts
from chatforge.llm.providers.sampling import SAMPLING_OPTIONS
from chatforge.llm.routing import missing_key_message
from chatforge.observability import record
from chatforge.observability.log_context import bind_run
from chatforge.observability.tracing import current_trace_parent
from chatforge.scheduling.usage import token_budget
from orchestration.queueing import dispatch

from .approval_policy import APPROVAL_TOOLS, tools_needing_approval, unattended_tools
from .attachments import ATTACHMENTS_OPTION, attach, attachments_checked, check_attachment_count
from .finalize import Outcome, run_finalize

logger = logging.getLogger(__name__)

ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


class OnActive(StrEnum):
    """What a message posted while the conversation has an active run does."""

    REJECT = "reject"  # 409 (the default)
    ENQUEUE = "enqueue"  # starts when the active run ends
    INTERRUPT = "interrupt"  # cancels the active run, then starts


@dataclass(frozen=True)
class RunOptions:
    model: str = ""
    tools: list[str] | None = None  # None: the assistant's tools, else every enabled tool
    max_iterations: int | None = None
    reasoning_effort: str | None = None
    assistant: str = ""  # an Assistant's name
    temperature: float | None = None
    max_tokens: int | None = None
    # OpenAI's sampling and tool-choice parameters, already checked (by /v1):
    # top_p, stop, seed, penalties, response_format, parallel_tool_calls,
    # tool_choice (chatforge/llm/providers/sampling.py).
    sampling: dict | None = None
    # Function specs of tools the /v1 client runs itself (never the server):
    # offered to the model beside the server's tools; a call of one ends the
    # run with finish_reason "tool_calls" (services/client_tools.py).
    client_tools: list[dict] | None = None
    # False where no person can be asked to approve a call (/v1): such calls
    # are then denied, or the request refused (CHATFORGE_V1_APPROVAL).
    can_ask_approval: bool = True


def _assistant(name: str) -> Assistant | None:
    if not name:
        return None
    assistant = Assistant.objects.filter(name=name).first()
    if assistant is None:
        available = list(Assistant.objects.values_list("name", flat=True))
        raise InvalidRequest(
            f"Unknown assistant '{name}'. Available assistants: {', '.join(available) or 'none'}.",
            details={"field": "assistant", "available": available},
        )
    return assistant


def check_run_options(options: RunOptions) -> dict:
    """Validate the request's options (with the assistant's defaults filled
    in); return what the run stores."""
    registry = get_catalog()
    assistant = _assistant(options.assistant)
    requested = options.tools if options.tools is not None else (assistant.tools if assistant else None)
    if requested and not settings.CHATFORGE_TOOLS_ENABLED:
        raise InvalidRequest("Tools are turned off on this server; send the message without 'tools'.")
    if requested is None:
        tools = registry.names()
    else:
        unknown = [name for name in requested if registry.get(name) is None]
        if unknown:
            raise UnknownTool(
                f"Unknown tool(s): {', '.join(unknown)}. Available tools: {', '.join(registry.names())}.",
                details={"unknown": unknown, "available": registry.names()},
            )
        tools = list(dict.fromkeys(requested))
        if len(tools) > settings.CHATFORGE_MAX_TOOLS_PER_REQUEST:
            raise InvalidRequest(
                f"{len(tools)} tools were named; a request may name at most "
                f"{settings.CHATFORGE_MAX_TOOLS_PER_REQUEST}.",
                details={"field": "tools"},
            )
    if options.tools is None and options.client_tools:
        # Tools the request did not name (every enabled tool, or the
        # assistant's) give way to a client tool of the same name: the client
        # chose its tool, not the server's (openai_api/client_tools.split_tools).
        shadowed = {spec["function"]["name"] for spec in options.client_tools}
        tools = [name for name in tools if name not in shadowed]
    asking = tools_needing_approval(registry, tools, assistant)
    unattended: dict = {}
    if asking and not options.can_ask_approval:
        tools, unattended = unattended_tools(tools, asking, named=options.tools is not None)
        asking = [name for name in asking if name in tools]
    client_tools = _client_tools(options.client_tools or [], server_tools=tools)
    cap = options.max_iterations
    if cap is None:
        cap = assistant.max_iterations if assistant and assistant.max_iterations is not None else settings.CHATFORGE_MAX_ITERATIONS
    limit = settings.CHATFORGE_MAX_ITERATIONS_LIMIT
    if not 0 <= cap <= limit:
        raise InvalidRequest(
            f"max_iterations must be between 0 and {limit}; got {cap}.",
            details={"field": "max_iterations"},
        )
    stored: dict = {"tools": tools, "max_iterations": cap}
    if asking:
        stored[APPROVAL_TOOLS] = asking
    stored.update(unattended)
    if client_tools:
        stored["client_tools"] = client_tools
    if options.reasoning_effort:
        stored["reasoning_effort"] = options.reasoning_effort
    if options.temperature is not None:
        stored["temperature"] = options.temperature
    if options.max_tokens is not None:
        stored["max_tokens"] = options.max_tokens
    stored.update({k: v for k, v in (options.sampling or {}).items() if k in SAMPLING_OPTIONS and v is not None})
    if assistant is not None:
        stored["assistant"] = assistant.name
        stored["system_prompt"] = assistant.system_prompt
        if assistant.model:
            stored["assistant_model"] = assistant.model
    return stored


def _client_tools(specs: list[dict], *, server_tools: list[str]) -> list[dict]:
    """The client's specs, once each. A name may be a server tool's only
    when that tool is not offered in this run: a model's call of the name
    goes to the client (llm_turns checks the client's names first)."""
    names = [spec["function"]["name"] for spec in specs]
    offered = set(server_tools)
    clash = [name for name in names if name in offered]
    if clash:
        raise InvalidRequest(
            f"Client tool name(s) {', '.join(clash)} are server tools offered in this run: rename the "
            "client's tools.",
            details={"field": "client_tools", "conflicting": clash},
        )
    if len(server_tools) + len(specs) > settings.CHATFORGE_MAX_TOOLS_PER_REQUEST:
        raise InvalidRequest(
            f"{len(server_tools) + len(specs)} tools would be offered to the model ({len(specs)} of "
            f"them the client's); a request may have at most {settings.CHATFORGE_MAX_TOOLS_PER_REQUEST}.",
            details={"field": "tools"},
        )
    return list({name: spec for name, spec in zip(names, specs, strict=True)}.values())


@dataclass(frozen=True)
class _Locked:
    """What a post reads once the conversation's row is locked."""

    active: list[tuple[UUID | None, UUID | None]]  # the user's active runs: (run id, conversation id)
    catalog_version: int
    current_leaf: UUID | None
    nodes: list[tree.Node]  # the conversation's messages' places in the tree


def _lock_conversation_listing_active_runs(conversation: Conversation, user: AbstractBaseUser, *, now,
                                           title: str) -> _Locked:
    """Lock the conversation and list the user's active runs, newest
    first, as ``(run id, conversation id)``, and the conversation's tree
    (its messages' ids, parents and roles, without their text), in one
    round trip with the transaction's ``BEGIN`` (``fetch_together``); also
    the tool catalog's version (decision 0024) and the conversation's
    current leaf (decision 0037).

    The ``UPDATE`` sets the conversation's activity time and its title from
    the first message, and locks its row until the transaction ends, so
    posts to one conversation are decided one at a time; the lists are read
    after it, by statements of their own, and so see the runs and messages
    of a post that held the lock before. The ``UPDATE`` returns the
    catalog's version (a sub-select, no statement of its own). Fixed SQL:
    every POST makes these (``chatforge.db.sql_rows``)."""
    touch = Read(None, f'UPDATE {Conversation._meta.db_table} SET "updated_at" = %s, '
                       '"title" = CASE WHEN "title" = \'\' THEN %s ELSE "title" END WHERE "id" = %s '
                       f'RETURNING COALESCE((SELECT "value" FROM {catalog_versioning.table()} WHERE "id" = 1), 0), '
                       '"current_leaf"',
                 [db_param(Conversation, "updated_at", now), title, db_param(Conversation, "id", conversation.pk)])
    runs = Read(None, f'SELECT "id", "conversation_id" FROM {Run._meta.db_table} '
                      'WHERE "user_id" = %s AND "status" IN (%s, %s) ORDER BY "created_at" DESC',
                [user.pk, *(status.value for status in ACTIVE)])
    touched, active, nodes = fetch_together(touch, runs, tree_nodes_read(conversation.pk))
    version, leaf = touched[0][1] if touched else (catalog_versioning.seen(), None)
    return _Locked([(as_uuid(run_id), as_uuid(conversation_id)) for _, (run_id, conversation_id) in active],
                   version, as_uuid(leaf), tree_nodes(nodes))


def _active_run_in(conversation: Conversation, active: list[tuple[UUID | None, UUID | None]]) -> Run | None:
    """The conversation's active run (the newest), after checking the user's
    cap on active runs against ``active``, all of the user's."""
    cap = settings.CHATFORGE_MAX_ACTIVE_RUNS_PER_USER
    if len(active) >= cap:
        raise TooManyActiveRuns(
            f"You have {len(active)} runs in progress, the most allowed at once; wait for one to "
            "finish or cancel one.",
            details={"active_runs": len(active), "limit": cap},
        )
    here = next((run_id for run_id, conversation_id in active if conversation_id == conversation.pk), None)
    # Active runs of a conversation belong to its owner, so the user's own
    # runs show them all; the row itself only when there is one.
    return Run.objects.get(pk=here) if here is not None else None


MAX_IDEMPOTENCY_KEY_CHARS = 255


def _check_token_budget(user: AbstractBaseUser) -> None:
    """A user whose token budget is used up is told so before anything is written."""
    budget = token_budget(user.pk)
    if budget is not None and budget.exhausted:
        record.token_budget_refused("post")
        raise TokenBudgetExhausted(
            f"{budget.message()} Nothing was sent to the model; send the message again after that.",
            details={"budget": budget.budget, "used": budget.used, "period": budget.period,
                     "retry_after_s": budget.retry_after_s},
            headers={"Retry-After": str(budget.retry_after_s)},
        )


def check_idempotency_key(key: str | None) -> str:
    """The key as stored ('' for none); refuses keys that cannot be stored."""
    key = (key or "").strip()
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS or not key.isprintable():
        raise InvalidRequest(
            f"The Idempotency-Key header must be at most {MAX_IDEMPOTENCY_KEY_CHARS} printable "
            "characters (a UUID is a good choice).",
            details={"header": "Idempotency-Key"},
        )
    return key


def run_for_idempotency_key(*, user: AbstractBaseUser, key: str, content: str,
                            answering: Message | None = None) -> Run | None:
    """The run an earlier request with this key started (marked ``replayed``),
    or None. The same key with a different message is the client's mistake;
    so is, for a regenerate (``answering``: the user message answered again),
    a key first used for another message."""
    if not key:
        return None
    run = Run.objects.select_related("user_message").filter(user=user, idempotency_key=key).first()
    if run is None:
        return None
    if run.user_message.content != content or (answering is not None and run.user_message_id != answering.pk):
        raise IdempotencyKeyReused(
            "This Idempotency-Key was already used for a different message. Use a new key for each "
            "new message, and the same key only to retry the same request.",
            details={"run_id": str(run.id)},
        )
    run.replayed = True
    return run


class _EndOfBranch:
    """``parent_id`` not given: the message follows the end of the
    conversation's current branch."""

    def __repr__(self) -> str:
        return "END_OF_BRANCH"


END_OF_BRANCH = _EndOfBranch()


@dataclass(frozen=True)
class _Ask:
    """What a run answers: a new user message (its text, files and place in
    the tree), or one already stored, answered again (``again``)."""

    content: str
    images: list[str]
    attachments: list[str]
    parent_id: object = END_OF_BRANCH  # END_OF_BRANCH, None (a new root) or a message's id
    replace_from: str | None = None
    again: Message | None = None


def run_start(
    *,
    user: AbstractBaseUser,
    conversation: Conversation,
    content: str,
    options: RunOptions,
    on_active: OnActive = OnActive.REJECT,
    idempotency_key: str = "",
    continued_rounds: list[dict] | None = None,
    images: list[str] | None = None,
    attachments: list[str] | None = None,
    parent_id: object = END_OF_BRANCH,
    replace_from: str | None = None,
) -> Run:
    """Write the user's message, the run and its first turn in one
    transaction and enqueue the turn after it commits.

    With an ``idempotency_key``, a request repeated by a client (a retry
    after a timeout or a 5xx) returns the first request's run — marked
    ``replayed`` — instead of starting another; the database's unique
    constraint settles two repeats that arrive at the same moment.

    ``continued_rounds``: tool rounds the run carries on from before its own
    first turn (a /v1 client's results for its own tools; ``Run.continued_rounds``).
    ``images``: image URLs of the user's message (checked by the caller
    against the model; ``providers/images.py``).
    ``attachments``: ids of the user's files the message carries (checked
    here, with the model: ``attachments.py``).
    ``parent_id``: the message the new one follows (decision 0037): by
    default the end of the conversation's current branch (or, posted while
    a run is active, that run's user message: finalize moves it under the
    answer); ``None`` for a new first message; a message's id to branch
    there (an edit: the edited message's parent). Refused while a run is active.
    ``replace_from``: the older spelling of an edit — the id of a user
    message, whose parent the new message gets (nothing is deleted).
    """
    ask = _Ask(content=content, images=images or [], attachments=attachments or [], parent_id=parent_id,
               replace_from=replace_from)
    return _start(user=user, conversation=conversation, ask=ask, options=options, on_active=on_active,
                  idempotency_key=idempotency_key, continued_rounds=continued_rounds or [])


def run_answer_again(*, user: AbstractBaseUser, message: Message, options: RunOptions,
                     idempotency_key: str = "") -> Run:
    """A new run answering the stored user ``message`` again (regenerate):
    no new message; its answer becomes a sibling of the earlier answers, and
    the conversation's current branch goes through it. Refused while the
    conversation has a run in progress."""
    ask = _Ask(content=message.content, images=[], attachments=[], again=message)
    return _start(user=user, conversation=message.conversation, ask=ask, options=options,
                  on_active=OnActive.REJECT, idempotency_key=idempotency_key, continued_rounds=[])


def _start(*, user: AbstractBaseUser, conversation: Conversation, ask: _Ask, options: RunOptions,
           on_active: OnActive, idempotency_key: str, continued_rounds: list[dict]) -> Run:
    replay = run_for_idempotency_key(user=user, key=idempotency_key, content=ask.content, answering=ask.again)
    if replay is not None:
        return replay
    try:
        return _run_create(user=user, conversation=conversation, ask=ask, options=options,
                           on_active=on_active, idempotency_key=idempotency_key,
                           continued_rounds=continued_rounds)
    except IntegrityError:
        replay = run_for_idempotency_key(user=user, key=idempotency_key, content=ask.content, answering=ask.again)
        if replay is None:
            raise
        return replay


def _check_message(ask: _Ask) -> None:
    content = ask.content
    if not content.strip() and not ask.images and not ask.attachments:
        raise InvalidRequest("The message is empty: send some text in 'content', or attach a file.",
                             details={"field": "content"})
    check_attachment_count(ask.attachments)
    if len(content) > settings.CHATFORGE_MAX_MESSAGE_CHARS:
        raise InvalidRequest(
            f"The message is {len(content)} characters long; the limit is "
            f"{settings.CHATFORGE_MAX_MESSAGE_CHARS}.",
            details={"field": "content"},
        )


def _parent_of_new_message(ask: _Ask, locked: _Locked, active: Run | None) -> UUID | None:
    """Where the new user message goes in the tree (decision 0037)."""
    if ask.replace_from is not None:
        edited = next((node for node in locked.nodes
                       if str(node.pk) == ask.replace_from and node.role == Message.Role.USER), None)
        if edited is None:
            raise InvalidRequest(
                "replace_from must be the id of one of this conversation's user messages.",
                details={"field": "replace_from"},
            )
        return edited.parent_id
    if ask.parent_id is None:
        return None
    if ask.parent_id is not END_OF_BRANCH:
        parent = next((node.pk for node in locked.nodes if str(node.pk) == str(ask.parent_id)), None)
        if parent is None:
            raise InvalidRequest(
                "parent_id must be the id of one of this conversation's messages (the edited message's "
                "parent_id to edit it, or null for a new first message); leave it out to continue the "
                "current branch.",
                details={"field": "parent_id"},
            )
        return parent
    if active is not None:
        # Posted while ``active`` runs: its answer is not written yet; finalize
        # moves this message under it (finalize._follow_the_answer).
        return active.user_message_id
    branch = tree.branch_through(locked.nodes, locked.current_leaf)
    return branch[-1].pk if branch else None


def _still_stored(user: AbstractBaseUser, file_ids: list[str]) -> list[str]:
    """Those of a stored message's files that were not deleted since (its
    text keeps naming them; the model gets what is left)."""
    if not file_ids:
        return []
    kept = {str(pk) for pk in StoredFile.objects.filter(pk__in=file_ids, user=user).values_list("pk", flat=True)}
    return [file_id for file_id in file_ids if file_id in kept]


def _run_create(
    *,
    user: AbstractBaseUser,
    conversation: Conversation,
    ask: _Ask,
    options: RunOptions,
    on_active: OnActive,
    idempotency_key: str,
    continued_rounds: list[dict],
) -> Run:
    if ask.again is None:
        _check_message(ask)
    content, images = ask.content, ask.images
    now = timezone.now()
    title = "" if conversation.title else (content.strip().splitlines() or ["(image)" if images else "(files)"])[0][:80]
    with transaction.atomic():
        locked = _lock_conversation_listing_active_runs(conversation, user, now=now, title=title)
        # A repeat that waited for the lock behind its first request sees its run now.
        replay = run_for_idempotency_key(user=user, key=idempotency_key, content=content, answering=ask.again)
        if replay is not None:
            return replay
        # Checked with the catalog as of this transaction: a catalog built at
        # another version is rebuilt first, so the run gets the tools of every
        # change committed before it (decision 0024). A refusal rolls back.
        catalog_versioning.note_seen(locked.catalog_version)
        stored_options = check_run_options(options)
        model = options.model or stored_options.pop("assistant_model", "") or settings.CHATFORGE_DEFAULT_MODEL
        missing_key = missing_key_message(model, user_id=user.pk) if model != DEMO_MODEL else None
        if missing_key:
            raise InvalidRequest(missing_key, details={"field": "model"})
        _check_token_budget(user)
        active = _active_run_in(conversation, locked.active)
        branching = ask.again is not None or ask.replace_from is not None or ask.parent_id is not END_OF_BRANCH
        if branching and active is not None:
            raise RunActive(
                f"This conversation has a run in progress ({active.id}); wait for it or cancel it "
                "before editing or regenerating a message.",
                details={"active_run_id": str(active.id)},
            )
        if active is not None and on_active == OnActive.REJECT:
            raise RunActive(
                f"This conversation has a run in progress ({active.id}). Wait for it, cancel it, or "
                "send the message with on_active=enqueue (starts after it) or on_active=interrupt "
                "(cancels it, then starts).",
                details={"active_run_id": str(active.id)},
            )
        parent_id = ask.again.parent_id if ask.again is not None else _parent_of_new_message(ask, locked, active)
        on_path = {node.pk for node in tree.path_to(locked.nodes, parent_id)}
        # A file attached to a message on another branch (the message an edit
        # replaces, or its new version) is not in this message's history: it
        # may come along.
        elsewhere = [node.pk for node in locked.nodes if node.pk not in on_path]
        if ask.again is not None:
            message = ask.again
            # Its files (those not deleted since) are checked again for this
            # run's model (an image for a model that takes none) and waited
            # for as on the first run; they stay linked where they are.
            files = attachments_checked(user=user, conversation=conversation, model=model, replaced=elsewhere,
                                        file_ids=_still_stored(user, attached_file_ids(message.content_json)))
        else:
            files = attachments_checked(user=user, conversation=conversation, file_ids=ask.attachments,
                                        model=model, replaced=elsewhere)
            message = Message(
                conversation=conversation, role=Message.Role.USER, content=content, parent_id=parent_id,
                content_json=content_parts(content, images, [f.pk for f in files]),
            )
        if files:
            # The first turn waits for their text (attachments.wait_for_attachments).
            stored_options[ATTACHMENTS_OPTION] = [str(f.pk) for f in files]
        run = Run(
            conversation=conversation,
            user=user,
            user_message=message,
            model=model,
            options=stored_options,
            heartbeat_at=timezone.now(),
            blocked_by=active,
            idempotency_key=idempotency_key,
            continued_rounds=continued_rounds,
            trace_parent=current_trace_parent(),
        )
        turn = LlmTurn(run=run, iteration=0, offered_tools=stored_options["max_iterations"] > 0)
        # The rows in one statement (the ORM would send four): the message
        # (unless answered again), the run, its first turn, and the
        # conversation's current leaf, now this message (decision 0037).
        write_together(
            *([insert_statement(message)] if ask.again is None else []),
            insert_statement(run),
            insert_statement(turn),
            update_statement(Conversation, {"current_leaf": message.pk}, pk=conversation.pk),
        )
        mark_saved([message, run, turn])
        conversation.current_leaf = message.pk
        if ask.again is None:
            attach(files=files, message=message)
        record.run_started(model)
        bind_run(run)  # the rest of the request's log lines name the run
        logger.info("run accepted", extra={"model": model, "queued_behind": str(active.id) if active else None})
        if active is None:
            dispatch.llm_turn(run, 0)
        elif on_active == OnActive.INTERRUPT:
            transaction.on_commit(lambda: run_request_cancel(run=active))
        # on_active=enqueue: finalize of the active run dispatches this one.
    return run


def run_request_cancel(*, run: Run) -> Run:
    """Ask a run to stop. Cooperative while the model streams (the engine sees
    the flag within a second and keeps the partial text); a run that is not
    streaming — waiting for tools, queued, or waiting behind another run —
    ends at once, and its unfinished tool calls get results saying so."""
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    run.refresh_from_db()
    if not run.is_terminal:
        fresh = timezone.now() - timedelta(seconds=settings.CHATFORGE_RUN_STALL_S)
        streaming = LlmTurn.objects.filter(run=run, status="running", heartbeat_at__gte=fresh).exists()
        if not streaming:
            run_finalize(run_id=str(run.id), outcome=Outcome.CANCELLED)
            run.refresh_from_db()
    return run
