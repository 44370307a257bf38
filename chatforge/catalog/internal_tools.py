"""Tools that need the database: they run with the calling user's identity
and only ever see that user's data."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Q

from chatforge.conversations.models import Message
from tools.base import Tool, ToolContext, ToolPolicy
from tools.errors import ToolError

_SNIPPET_CHARS = 300


def _snippet(text: str, query: str) -> str:
    at = text.lower().find(query.lower().split()[0]) if query.split() else -1
    start = max(0, at - 80) if at >= 0 else 0
    piece = text[start : start + _SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + _SNIPPET_CHARS < len(text) else "")


def _search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    # The executor runs each call in its own thread, and Django opens one
    # database connection per thread: close it, or every call leaks one.
    try:
        return _search_messages(args, ctx)
    finally:
        connection.close()


def _search_messages(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if ctx.user_id is None:
        raise ToolError("search_conversations needs to know whose conversations to search")
    query = args["query"].strip()
    limit = args.get("limit", 5)
    messages = Message.objects.filter(
        conversation__user_id=ctx.user_id, role__in=[Message.Role.USER, Message.Role.ASSISTANT]
    ).select_related("conversation")
    if ctx.run_id:
        messages = messages.exclude(conversation__runs__id=ctx.run_id)  # not the conversation asking
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

        vector = SearchVector("content", config="english")
        search = SearchQuery(query, config="english", search_type="websearch")
        hits = messages.annotate(rank=SearchRank(vector, search)).filter(rank__gt=0).order_by("-rank", "-created_at")
    else:  # embedded mode: every word must appear
        condition = Q()
        for word in query.split():
            condition &= Q(content__icontains=word)
        hits = messages.filter(condition).order_by("-created_at")
    results = [
        {
            "conversation_id": str(m.conversation_id),
            "conversation_title": m.conversation.title,
            "role": m.role,
            "created_at": m.created_at.isoformat(),
            "snippet": _snippet(m.content, query),
        }
        for m in hits[:limit]
    ]
    return {"query": query, "results": results}


SEARCH_CONVERSATIONS = Tool(
    name="search_conversations",
    description=(
        "Search the user's own earlier conversations for messages matching a query "
        "(words or phrases). Returns matching snippets with their conversation."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 500},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    handler=_search,
    policy=ToolPolicy(timeout_s=10),
)

INTERNAL_TOOLS = [SEARCH_CONVERSATIONS]
