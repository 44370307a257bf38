"""search_conversations sees only the caller's own messages."""

from __future__ import annotations

import pytest

from chatforge.catalog.catalog import get_catalog
from chatforge.conversations.models import Conversation, Message
from orchestration.services.tool_context import tool_context_for
from tools.executor import execute_tool

pytestmark = pytest.mark.django_db(transaction=True)


def test_search_finds_only_the_callers_messages(make_user):
    alice, _ = make_user()
    bob, _ = make_user()
    trip = Conversation.objects.create(user=alice, title="Trip")
    Message.objects.create(conversation=trip, role="user", content="Where can I buy fresh pineapples in Lisbon?")
    Message.objects.create(conversation=trip, role="assistant", content="Try the Mercado da Ribeira.")
    other = Conversation.objects.create(user=bob, title="Bob's")
    Message.objects.create(conversation=other, role="user", content="pineapples are my secret")

    result = execute_tool(get_catalog(fresh=True), "search_conversations", {"query": "pineapples"},
                          context=tool_context_for(user_id=alice.id))

    assert result.success, result.error
    hits = result.result["results"]
    assert [h["conversation_id"] for h in hits] == [str(trip.id)]
    assert "Lisbon" in hits[0]["snippet"] and hits[0]["conversation_title"] == "Trip"
    nothing = execute_tool(get_catalog(), "search_conversations", {"query": "zeppelin"},
                           context=tool_context_for(user_id=alice.id))
    assert nothing.result["results"] == []
