"""What the web pages show, gathered from the same services the API uses.

The views stay thin: each page's data comes from one function here, and the
pages' JavaScript receives it as JSON (``json_script``) in the same shapes
the REST API returns, so one renderer serves both the first paint and the
live updates.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from chatforge.accounts.models import ApiToken
from chatforge.accounts.secrets import user_secret_names
from chatforge.api.serializers import ConversationSerializer, MessageSerializer, message_context
from chatforge.catalog.describe import tool_descriptions
from chatforge.catalog.models import Assistant
from chatforge.conversations import selectors
from chatforge.conversations.listing import conversation_list
from chatforge.conversations.models import Conversation, Message, Run
from chatforge.llm.listing import model_list
from orchestration.services.approvals import approval_decisions

# The sidebar lists this many recent conversations; the history this many
# recent messages (older ones stay readable through the API).
SIDEBAR_CONVERSATIONS = 50
HISTORY_MESSAGES = 200


def assistant_choices() -> list[dict[str, Any]]:
    return list(Assistant.objects.values("name", "description", "model", "tools", "max_iterations"))


def chat_page_data(user: AbstractBaseUser, conversation: Conversation | None) -> dict[str, Any]:
    """Sidebar, pickers, and the open conversation's history and live runs."""
    # The sidebar is the person's own chats, in the API's list order (pinned
    # first, archived ones left out); /v1 clients' conversations are listed
    # on their own (GET /api/conversations/?source=openai). One more is read
    # than shown, to say whether the page should ask the API for the next.
    recent = list(conversation_list(user, source=Conversation.Source.CHAT)[:SIDEBAR_CONVERSATIONS + 1])
    data: dict[str, Any] = {
        "conversations": ConversationSerializer(recent[:SIDEBAR_CONVERSATIONS], many=True).data,
        "conversations_more": len(recent) > SIDEBAR_CONVERSATIONS,
        "models": model_list(user=user),  # what this person can use, and why not
        "tools": [{"name": t["name"], "description": t["description"], "kind": t["kind"]} for t in tool_descriptions()],
        "assistants": assistant_choices(),
        "conversation": None,
        "messages": [],
        "active_runs": [],
        "older_messages_hidden": 0,
    }
    if conversation is None:
        return data
    # Active runs are read before the messages: a run that ends in between
    # is then in both (the page draws its stored answer and skips the run),
    # never in neither, which left a fast answer off the page.
    active = [
        {"id": str(run.id), "user_message_id": str(run.user_message_id), "status": run.status}
        for run in Run.objects.filter(conversation=conversation, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .only("id", "user_message_id", "status")
        .order_by("created_at")
    ]
    tree = selectors.message_tree_of(conversation)
    messages = tree.current_branch()  # the versions the person last chose (decision 0037)
    shown = messages[-HISTORY_MESSAGES:]
    data["conversation"] = ConversationSerializer(conversation).data
    shown_data = MessageSerializer(shown, many=True, context=message_context(tree, shown)).data
    data["messages"] = _with_approvals(_with_run_errors(shown_data))
    data["older_messages_hidden"] = len(messages) - len(shown)
    answered = {str(m.run_id) for m in messages if m.role == Message.Role.ASSISTANT and m.run_id}
    data["active_runs"] = [run for run in active if run["id"] not in answered]
    return data


def _with_run_errors(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failed replies carry their run's error, so history says why (one query)."""
    failed = [m["run"] for m in messages if m["role"] == "assistant" and m["status"] == "error" and m["run"]]
    errors = {str(k): v for k, v in Run.objects.filter(id__in=failed).values_list("id", "error")}
    for message in messages:
        if message["role"] == "assistant":
            message["run_error"] = errors.get(str(message["run"]), "")
    return messages


def _with_approvals(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replies carry the decisions on their tool calls that asked for
    approval (``approval_decisions``): shown as *denied* by whom, not as a
    failure."""
    runs = [m["run"] for m in messages if m["role"] == "assistant" and m["run"] and m["tool_rounds"]]
    by_run = approval_decisions(runs)
    for message in messages:
        if message["role"] == "assistant":
            message["approvals"] = by_run.get(str(message["run"]), {})
    return messages


def tool_testing_page_data(user: AbstractBaseUser) -> dict[str, Any]:
    """The tools, and the models with what ``user`` can call (as the chat page's picker)."""
    return {"tools": tool_descriptions(), "models": model_list(user=user)}


def settings_page_data(user: AbstractBaseUser) -> dict[str, Any]:
    """The user's secret names (never values) and tokens (prefix only)."""
    return {
        "secret_names": user_secret_names(user=user),
        "tokens": list(ApiToken.objects.filter(user=user).only(
            "id", "name", "prefix", "created_at", "last_used_at", "revoked_at")),
    }
