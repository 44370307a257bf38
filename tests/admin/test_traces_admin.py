"""Conversations and runs as read-only traces; lists that stay cheap with many rows."""

from __future__ import annotations

import html

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatforge.conversations.models import Conversation, Message, Run
from chatforge.conversations.traces import build_run_trace, pretty_json_text

from .factories import make_many, make_traced_run, make_user

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_run_page_shows_the_trace_round_by_round(admin_client):
    run = make_traced_run(make_user("alice"))

    page = text(admin_client.get(f"/admin/conversations/run/{run.pk}/change/"))

    trace = page.split('id="run-trace"')[1]
    assert "Round 0: model turn and 2 tool calls" in trace and "Round 1: model turn" in trace
    assert trace.index("Let me work that out.") < trace.index("1. calculator") < trace.index("2. echo") \
        < trace.index("Round 1") < trace.index("6*7 is 42. Hi!")
    assert "The user wants a product and a greeting." in trace  # reasoning
    assert '{\n  "expression": "6*7"\n}' in trace  # arguments, indented
    assert '{"text": "hi"' in trace  # broken arguments as the model sent them
    assert '{\n  "result": 42\n}' in trace  # output, indented
    assert "upstream answered 503 on attempt 1" in trace  # the last error
    assert "850 ms" in trace and "tool_calls" in trace  # provider time, finish reason
    assert "3000 ms" in trace  # created → finished
    assert "What is 6*7? Say hi too." in page  # the user's message
    assert 'name="_save"' not in page  # read-only


def test_build_run_trace_in_two_queries():
    run = make_traced_run(make_user("alice"))
    with CaptureQueriesContext(connection) as queries:
        trace = build_run_trace(run)
    assert len(queries) == 2
    assert [r.iteration for r in trace.rounds] == [0, 1] and trace.tool_calls == 2
    assert [c.invocation.name for c in trace.rounds[0].calls] == ["calculator", "echo"]
    assert trace.total_ms == 3000 and trace.provider_ms == 1250
    assert pretty_json_text("plain text") == "plain text" and pretty_json_text("{broken") == "{broken"


def test_the_conversation_page_lists_messages_and_runs_with_links(admin_client):
    run = make_traced_run(make_user("alice"))
    answer = Message.objects.get(run=run)

    page = text(admin_client.get(f"/admin/conversations/conversation/{run.conversation_id}/change/"))

    messages = page.split('id="conversation-messages"')[1].split('id="conversation-runs"')[0]
    assert messages.index("What is 6*7?") < messages.index("6*7 is 42. Hi!")
    assert f"/admin/conversations/message/{answer.pk}/change/" in messages
    assert f"/admin/conversations/run/{run.pk}/change/" in page.split('id="conversation-runs"')[1]


def test_the_conversation_page_says_the_model_and_assistant_of_each_answer_and_run(admin_client):
    run = make_traced_run(make_user("alice"))
    Run.objects.filter(pk=run.pk).update(options={**run.options, "assistant": "Tutor"}, model="tutor-model")
    Message.objects.filter(run=run).update(model="tutor-model")

    page = text(admin_client.get(f"/admin/conversations/conversation/{run.conversation_id}/change/"))

    messages = page.split('id="conversation-messages"')[1].split('id="conversation-runs"')[0]
    answer_row = next(row for row in messages.split("<tr>") if "6*7 is 42. Hi!" in row)
    assert "<th>assistant</th>" in messages
    assert "<td>tutor-model</td>" in answer_row and "<td>Tutor</td>" in answer_row
    question_row = next(row for row in messages.split("<tr>") if "What is 6*7?" in row)
    assert "Tutor" not in question_row
    runs = page.split('id="conversation-runs"')[1]
    assert "<th>assistant</th>" in runs and "<td>tutor-model</td>" in runs and "<td>Tutor</td>" in runs


def test_traces_cannot_be_added_or_changed(admin_client):
    run = make_traced_run(make_user("alice"))
    assert admin_client.get("/admin/conversations/run/add/").status_code == 403
    response = admin_client.post(f"/admin/conversations/run/{run.pk}/change/", {"status": "failed"})
    assert response.status_code == 403
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_only_superusers_delete_and_never_while_a_run_is_active(admin_client, client, django_user_model):
    run = make_traced_run(make_user("alice"))
    active = make_traced_run(make_user("bob"))
    Run.objects.filter(pk=active.pk).update(status=Run.Status.RUNNING)

    assert admin_client.get(f"/admin/conversations/run/{active.pk}/delete/").status_code == 403
    assert admin_client.get(f"/admin/conversations/conversation/{active.conversation_id}/delete/").status_code == 403
    # Deleting the user of an active run is refused too, since it would delete the run.
    user_delete = admin_client.get(f"/admin/auth/user/{active.user_id}/delete/")
    assert "your account doesn't have permission to delete the following types of objects" in text(user_delete)

    staff = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_run", "delete_run"]))
    client.force_login(staff)
    assert client.get(f"/admin/conversations/run/{run.pk}/change/").status_code == 200
    assert client.get(f"/admin/conversations/run/{run.pk}/delete/").status_code == 403

    admin_client.post(f"/admin/conversations/conversation/{run.conversation_id}/delete/", {"post": "yes"})
    assert not Conversation.objects.filter(pk=run.conversation_id).exists()
    assert Conversation.objects.filter(pk=active.conversation_id).exists()


def test_a_uuid_in_the_search_box_finds_the_row_by_key(admin_client):
    run = make_traced_run(make_user("alice"), title="Holiday plans")
    other = make_traced_run(make_user("bob"))

    by_id = admin_client.get(f"/admin/conversations/run/?q={run.pk}").context["cl"].result_list
    by_conversation = admin_client.get(f"/admin/conversations/run/?q={run.conversation_id}").context["cl"].result_list
    by_name = admin_client.get("/admin/conversations/run/?q=bob").context["cl"].result_list
    by_title = admin_client.get("/admin/conversations/conversation/?q=holiday").context["cl"].result_list

    assert [r.pk for r in by_id] == [run.pk] and [r.pk for r in by_conversation] == [run.pk]
    assert [r.pk for r in by_name] == [other.pk]
    assert [c.pk for c in by_title] == [run.conversation_id]
    messages = admin_client.get(f"/admin/conversations/message/?q={run.pk}").context["cl"].result_list
    assert {m.role for m in messages} == {"assistant"}


def test_run_list_columns_and_filters(admin_client):
    run = make_traced_run(make_user("alice"))
    page = admin_client.get("/admin/conversations/run/?status__exact=completed&model=demo")
    [row] = page.context["cl"].result_list
    assert row.pk == run.pk and row.call_total == 2
    body = text(page)
    assert "3000 ms" in body and ">alice<" in body
    sorted_by_duration = admin_client.get("/admin/conversations/run/?o=7")  # the duration column
    assert sorted_by_duration.status_code == 200


# One list per kind of row that can number in the thousands. The number of
# queries of a list page must not depend on how many rows it shows.
LISTS = [
    ("run", "/admin/conversations/run/"),
    ("run", "/admin/conversations/conversation/"),
    ("run", "/admin/conversations/message/"),
    ("token", "/admin/accounts/apitoken/"),
    ("secret", "/admin/accounts/usersecret/"),
    ("model", "/admin/llm/languagemodel/"),
    ("model", "/admin/llm/modelvalidation/"),
    ("model", "/admin/llm/provider/"),
    ("tool", "/admin/catalog/tooldefinition/"),
    ("tool", "/admin/catalog/assistant/"),
    ("run", "/admin/auth/user/"),
]


@pytest.mark.parametrize(("kind", "url"), LISTS)
def test_list_pages_make_the_same_few_queries_for_2_or_40_rows(admin_client, django_assert_max_num_queries, kind,
                                                               url):
    make_many(kind, 2)
    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(url).status_code == 200
    make_many(kind, 38, offset=2)
    with django_assert_max_num_queries(15), CaptureQueriesContext(connection) as many:
        response = admin_client.get(url)
    assert response.status_code == 200 and len(response.context["cl"].result_list) >= 40
    assert len(many) == len(few), [q["sql"] for q in many.captured_queries]


def test_the_run_page_shows_who_decided_each_approval_and_when(admin_client):
    from datetime import timedelta

    from django.utils import timezone

    from chatforge.conversations.models import ToolInvocation

    owner = make_user("ana")
    run = make_traced_run(owner)
    decided_at = timezone.now().replace(microsecond=0)
    ToolInvocation.objects.filter(run=run, name="calculator").update(
        approval_expires_at=decided_at + timedelta(minutes=10), approval_decision="approve",
        approval_decided_by=owner, approval_decided_at=decided_at)
    ToolInvocation.objects.filter(run=run, name="echo").update(
        approval_expires_at=decided_at, approval_decision="deny", approval_reason="No decision within 600 seconds.",
        approval_decided_at=decided_at)

    trace = text(admin_client.get(f"/admin/conversations/run/{run.pk}/change/")).split('id="run-trace"')[1]

    calculator, echo = trace.split("1. calculator")[1].split("2. echo")
    assert f"approved by ana at {decided_at:%Y-%m-%d %H:%M:%S}" in " ".join(calculator.split())
    assert "denied by the server (no decision in time)" in " ".join(echo.split())
    assert "No decision within 600 seconds." in echo
