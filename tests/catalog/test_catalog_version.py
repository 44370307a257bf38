"""The tool catalog's version (decision 0024): every saved or deleted
catalog row bumps it in its own transaction, and a step's claim reads it,
so a worker's cached catalog is rebuilt before the first step claimed
after an edit committed, however long the cache would otherwise last."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from chatforge.catalog import catalog, versioning
from chatforge.catalog.catalog import get_catalog
from chatforge.catalog.models import CatalogVersion, ToolDefinition
from chatforge.conversations.models import Conversation, LlmTurn, Run, ToolInvocation
from chatforge.mcp.models import McpServer
from orchestration.services.claims import claim_invocation, claim_turn
from orchestration.services.runs import RunOptions, run_start
from tests.catalog.test_catalog import mock_tool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def a_long_lived_cache(settings, monkeypatch):
    """An hour: only the version can make the catalog change here. The
    process starts as a fresh worker would (the flush between tests empties
    the version's table, so the numbers start again)."""
    settings.CHATFORGE_TOOL_CATALOG_TTL_S = 3600
    settings.OPENAI_API_KEY = "test-key"  # the runs are claimed, never sent to a model
    monkeypatch.setattr(versioning, "_seen", 0)
    catalog.forget_cached()
    yield
    catalog.forget_cached()


def version() -> int:
    return CatalogVersion.objects.filter(pk=1).values_list("value", flat=True).first() or 0


def edit_elsewhere(tool: ToolDefinition) -> None:
    """Another process's admin edit as it reaches the database: the row and
    the bump in one transaction, and none of this process's signals."""
    with transaction.atomic():
        ToolDefinition.objects.bulk_create([tool])  # sends no post_save
        with connection.cursor() as cursor:
            cursor.execute(f'UPDATE {versioning.table()} SET "value" = "value" + 1 WHERE "id" = 1')
            if cursor.rowcount == 0:
                cursor.execute(f'INSERT INTO {versioning.table()} ("id", "value") VALUES (1, 1)')


def start(user) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                     options=RunOptions(model="plain"))


def test_every_saved_or_deleted_catalog_row_counts():
    before = version()
    tool = mock_tool()
    tool.save()
    tool.description = "Weather, made up again."
    tool.save()
    server = McpServer.objects.create(name="files", url="http://127.0.0.1:1/mcp")
    server.delete()
    tool.delete()
    assert version() == before + 5


def test_a_rolled_back_edit_counts_nothing():
    before = version()
    with pytest.raises(RuntimeError), transaction.atomic():
        mock_tool().save()
        raise RuntimeError("the admin's save failed")
    assert version() == before


def test_this_process_rebuilds_after_its_own_edit():
    assert "fake_weather" not in get_catalog().names()
    mock_tool().save()
    assert "fake_weather" in get_catalog().names()


def test_another_process_edit_is_used_from_the_next_claimed_turn(make_user, idle_broker):
    user, _ = make_user()
    run = start(user)
    assert "fake_weather" not in get_catalog().names()
    edit_elsewhere(mock_tool())
    assert "fake_weather" not in get_catalog().names()  # cached, and nothing has said otherwise yet

    assert claim_turn(str(run.id), 0) is not None
    assert "fake_weather" in get_catalog().names()


def test_another_process_edit_is_used_from_the_next_claimed_tool_call(make_user, idle_broker):
    user, _ = make_user()
    run = start(user)
    LlmTurn.objects.filter(run=run, iteration=0).update(status="completed")
    ToolInvocation.objects.create(run=run, tool_call_id="c1", iteration=0, position=0, name="echo",
                                  arguments="{}", status="pending")
    assert "other_weather" not in get_catalog().names()
    edit_elsewhere(mock_tool(name="other_weather"))

    assert claim_invocation(str(run.id), "c1") is not None
    assert "other_weather" in get_catalog().names()


def test_a_run_posted_after_another_process_edit_gets_the_tools_as_edited(make_user, idle_broker):
    """The web process checks and stores a new run's tool names: its
    transaction's first statement reads the version, so a POST whose
    transaction starts after the edit committed sees it (the names the
    request gives, and the default of every enabled tool)."""
    user, _ = make_user()
    start(user)  # this process has a catalog, at the current version
    edit_elsewhere(mock_tool(name="posted_weather"))
    assert "posted_weather" not in get_catalog().names()  # cached, and nothing has said otherwise yet

    named = run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                      options=RunOptions(model="plain", tools=["posted_weather"]))
    defaulted = start(user)

    assert named.options["tools"] == ["posted_weather"]
    assert "posted_weather" in defaulted.options["tools"]


def test_a_tool_removed_elsewhere_is_refused_to_the_next_post(make_user, idle_broker):
    from chatforge.errors import UnknownTool

    user, _ = make_user()
    tool = mock_tool(name="gone_weather")
    tool.save()
    assert "gone_weather" in start(user).options["tools"]
    with transaction.atomic(), connection.cursor() as cursor:  # another process: no signal here
        cursor.execute(f'DELETE FROM {ToolDefinition._meta.db_table} WHERE "name" = %s', ["gone_weather"])
        cursor.execute(f'UPDATE {versioning.table()} SET "value" = "value" + 1 WHERE "id" = 1')

    with pytest.raises(UnknownTool, match="Unknown tool"):
        run_start(user=user, conversation=Conversation.objects.create(user=user), content="go",
                  options=RunOptions(model="plain", tools=["gone_weather"]))
    assert "gone_weather" not in start(user).options["tools"]
    assert not Run.objects.filter(options__tools=["gone_weather"]).exists()  # the refused POST wrote nothing


def test_the_admins_enable_and_disable_actions_count(admin_client):
    for name in ("tool_a", "tool_b"):
        mock_tool(name=name).save()
    ids = list(ToolDefinition.objects.values_list("pk", flat=True))
    before = version()

    response = admin_client.post("/admin/catalog/tooldefinition/", {"action": "disable", "_selected_action": ids},
                                 follow=True)
    assert "every step that starts from now on uses the change" in response.content.decode()
    assert version() == before + 1
    assert not {"tool_a", "tool_b"} & set(get_catalog().names())
