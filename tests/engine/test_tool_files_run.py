"""Tools and files through whole runs, driven step by step in this process
(the tasks delivered by hand, the fake OpenAI server as the model): a file
a tool returns reaches the ``tool_output`` event, the stored tool rounds and
the model's next request; ``read_file`` pages through a conversation's
document; an id of another user's file goes back to the model; and a
redelivered call does not save its file twice."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.files.models import StoredFile
from chatforge.files.storage import file_storage
from orchestration import tasks
from orchestration.event_log import get_event_log
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.tool_files import ConversationFiles
from tests.fakes.openai_server import Reply, tool_results
from tests.support.files import stored_file

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("in_process_engine")]


def _start(user, model: str, *, tools: list[str], conversation: Conversation | None = None) -> Run:
    return run_start(user=user, conversation=conversation or Conversation.objects.create(user=user),
                     content="Please do it.", options=RunOptions(model=model, tools=tools))


def _calls(run: Run) -> list[str]:
    return list(ToolInvocation.objects.filter(run=run).order_by("position").values_list("tool_call_id", flat=True))


def _tool_outputs(run: Run) -> list[dict]:
    return [e["data"] for e in get_event_log().read(str(run.id), after=0) if e["type"] == "tool_output"]


def _run_through(run: Run) -> None:
    tasks.llm_turn(str(run.id), 0)
    for call in _calls(run):
        tasks.tool_call(str(run.id), call)
    tasks.llm_turn(str(run.id), 1)
    run.refresh_from_db()
    assert run.status == "completed", run.error


def test_a_file_a_tool_returns_reaches_the_event_the_stored_rounds_and_the_models_next_request(
        fake_llm, make_user):
    user = make_user()[0]
    fake_llm.add_script("files-returned", [Reply(text="Saving.", tool_calls=[("save_report", {})]),
                                           Reply(text="Saved report.csv.")])
    run = _start(user, "files-returned", tools=["save_report"])

    _run_through(run)

    row = StoredFile.objects.get()
    assert (row.source, row.run_id, row.tool_call_id, row.conversation_id, row.name, row.content_type) == (
        "tool", run.pk, _calls(run)[0], run.conversation_id, "report.csv", "text/csv")
    with file_storage().open(row.storage_name, "rb") as handle:
        assert handle.read() == b"city,people\nOslo,700000\n"
    returned = [{"id": str(row.pk), "name": "report.csv", "content_type": "text/csv", "kind": "document",
                 "size": row.size}]
    line = (f"\n[Files saved to the conversation by this call: \"report.csv\" (id {row.pk}, text/csv, "
            f"{row.size} bytes)]")
    (event,) = _tool_outputs(run)
    assert event["files"] == returned
    assert event["output"] == '{"saved":"report.csv"}' + line
    answer = Message.objects.get(run=run, role="assistant")
    (result,) = answer.tool_rounds[0]["results"]
    assert result["files"] == returned and result["output"] == event["output"]
    assert ToolInvocation.objects.get(run=run).result["files"] == returned
    # The model's next turn reads the line naming the file and its id.
    (sent,) = tool_results(fake_llm.requests_for("files-returned")[1])
    assert sent["content"].endswith(line)


def test_a_call_that_saves_nothing_carries_no_files(fake_llm, make_user):
    user = make_user()[0]
    fake_llm.add_script("files-none", [Reply(tool_calls=[("echo", {"text": "hi"})]), Reply(text="Done.")])
    run = _start(user, "files-none", tools=["echo"])

    _run_through(run)

    (event,) = _tool_outputs(run)
    assert "files" not in event and event["output"] == "hi"
    assert "files" not in Message.objects.get(run=run, role="assistant").tool_rounds[0]["results"][0]


def test_list_files_and_read_file_page_through_a_document_of_the_conversation(fake_llm, make_user):
    user = make_user()[0]
    conversation = Conversation.objects.create(user=user)
    text = "".join(f"Paragraph {n}.\n" for n in range(40))
    doc = stored_file(user, conversation=conversation, name="long.md", data=text.encode())
    fake_llm.add_script("files-read", [
        Reply(tool_calls=[("list_files", {}), ("read_file", {"file_id": str(doc.pk), "offset": 100,
                                                             "max_chars": 50})]),
        Reply(text="Read it."),
    ])
    run = _start(user, "files-read", tools=["list_files", "read_file"], conversation=conversation)

    _run_through(run)

    listed, page = tool_results(fake_llm.requests_for("files-read")[1])
    assert str(doc.pk) in listed["content"] and '"name":"long.md"' in listed["content"]
    assert page["content"] == (
        f"[long.md: characters 100-150 of {len(text)}; the next page starts at offset 150 "
        f"(read_file with file_id=\"{doc.pk}\", offset=150)]\n{text[100:150]}")


def test_a_file_id_of_another_users_file_goes_back_to_the_model(fake_llm, make_user):
    alice, bob = make_user()[0], make_user()[0]
    bobs = stored_file(bob, conversation=Conversation.objects.create(user=bob))
    fake_llm.add_script("files-foreign", [Reply(tool_calls=[("file_size", {"file_id": str(bobs.pk)})]),
                                          Reply(text="I cannot see it.")])
    run = _start(alice, "files-foreign", tools=["file_size"])

    _run_through(run)

    (event,) = _tool_outputs(run)
    assert event["status"] == "error"
    assert event["output"] == (
        f"Error: Invalid arguments for tool 'file_size': $.file_id: No file with id '{bobs.pk}' in this "
        "conversation; list_files shows the files there. Please check the arguments and try again.")


def test_a_redelivered_call_reuses_the_file_its_first_delivery_saved(fake_llm, make_user):
    user = make_user()[0]
    fake_llm.add_script("files-redelivered", [Reply(tool_calls=[("save_report", {})]), Reply(text="Done.")])
    run = _start(user, "files-redelivered", tools=["save_report"])
    tasks.llm_turn(str(run.id), 0)
    (call,) = _calls(run)
    # The first delivery saved its file, then its worker died before recording
    # the call: the call is left running, its lease run out.
    first = ConversationFiles(user_id=user.pk, conversation_id=str(run.conversation_id), run_id=str(run.id),
                              tool_call_id=call).save("report.csv", b"city,people\nOslo,700000\n")
    ToolInvocation.objects.filter(run=run).update(status="running", deliveries=1,
                                                  heartbeat_at=timezone.now() - timedelta(hours=1))

    tasks.tool_call(str(run.id), call)
    tasks.llm_turn(str(run.id), 1)

    assert list(StoredFile.objects.values_list("id", flat=True)) == [uuid.UUID(first.id)]
    assert ToolInvocation.objects.get(run=run).deliveries == 2
    (event,) = _tool_outputs(run)
    assert [f["id"] for f in event["files"]] == [first.id]
    run.refresh_from_db()
    assert run.status == "completed"
