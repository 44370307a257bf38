"""The official OpenAI Python SDK against the live distributed stack: chats
with server-side tools (given by name), streamed and not, the ``.stream()``
helper, continuing a conversation, errors in OpenAI's shape, and a client
that disconnects mid-run cancelling it."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from tests.fakes.openai_server import Reply, echo_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def sdk(stack, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60)


def two_rounds() -> list[Reply]:
    return [
        Reply(text="Let me work it out.", tool_calls=[("calculator", {"expression": "6*7"}), ("echo", {"text": "hi"})]),
        Reply(text=" One more.", tool_calls=[("echo", {"text": "again"})]),
        Reply(text=" The answer is 42."),
    ]


def extra(model, name: str):
    return (model.model_extra or {}).get(name)


def wait_for_status(run_id: str, statuses: set[str], timeout: float = 60) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} is still {Run.objects.get(pk=run_id).status}")


def test_streamed_chat_with_tools_by_name(stack, fake_llm, make_user):
    """By default a stream carries no ``tool_calls``: every client but ours
    would take them as calls to run itself. The server's tool activity rides
    in the ``chatforge`` extension object, which clients ignore, and each
    model turn's text is set apart from the last by a blank line."""
    fake_llm.add_script("oa-stream", two_rounds())
    _, token = make_user()

    stream = sdk(stack, token).chat.completions.create(
        model="oa-stream", messages=[{"role": "user", "content": "What is 6*7?"}],
        tools=["calculator", "echo"], stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)

    assert len({(c.id, c.created) for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    run_id, conversation_id = extra(chunks[0], "run_id"), extra(chunks[0], "conversation_id")
    assert all(extra(c, "run_id") == run_id and extra(c, "conversation_id") == conversation_id for c in chunks)
    # The first chunk carries no model output, only who is answering and where.
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.content

    deltas = [c.choices[0].delta for c in chunks if c.choices]
    text = "".join(d.content or "" for d in deltas)
    assert text == "Let me work it out.\n\n One more.\n\n The answer is 42."
    assert not any(d.tool_calls for d in deltas) and not any(extra(d, "tool_output") for d in deltas)

    events = [extra(c, "chatforge") for c in chunks if extra(c, "chatforge")]
    calls = [e["tool_call"] for e in events if "tool_call" in e]
    assert [c["function"]["name"] for c in calls] == ["calculator", "echo", "echo"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"expression": "6*7"}
    outputs = {e["tool_output"]["tool_call_id"]: e["tool_output"] for e in events if "tool_output" in e}
    assert set(outputs) == {c["id"] for c in calls}
    assert json.loads(outputs[calls[0]["id"]]["output"])["result"] == 42 and outputs[calls[2]["id"]]["output"] == "again"
    kinds = ["call" if "tool_call" in e else "output" for e in events]
    assert kinds == ["call", "call", "output", "output", "call", "output"]

    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert [c for c in chunks if c.choices and c.choices[0].finish_reason] == [chunks[-2]]

    # The tools were expanded from their names: the model got ChatForge's specs.
    sent = fake_llm.requests_for("oa-stream")[0]["tools"]
    assert [t["function"]["name"] for t in sent] == ["calculator", "echo"]
    assert all(t["function"]["parameters"]["properties"] for t in sent)

    run = Run.objects.get(pk=run_id)
    assert run.status == "completed" and str(run.conversation_id) == conversation_id
    assert Message.objects.get(run=run, role="assistant").content == " The answer is 42."


@pytest.mark.parametrize("ask", [{"extra_body": {"show_tool_calls": True}},
                                 {"extra_headers": {"X-ChatForge-Show-Tool-Calls": "true"}}])
def test_a_client_that_asks_gets_the_server_tool_calls_as_tool_calls(stack, fake_llm, make_user, ask):
    """Standard ``tool_calls`` for clients that know ChatForge ran the tools
    (docs/openai-api.md, "Server tools in a stream"):
    one ``tool_calls`` chunk per round and ``delta.tool_output`` after each."""
    fake_llm.add_script("oa-stream-calls", two_rounds())
    _, token = make_user()

    chunks = list(sdk(stack, token).chat.completions.create(
        model="oa-stream-calls", messages=[{"role": "user", "content": "What is 6*7?"}],
        tools=["calculator", "echo"], stream=True, **ask,
    ))

    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Let me work it out.\n\n One more.\n\n The answer is 42."
    rounds = [[(t.index, t.function.name) for t in d.tool_calls] for d in deltas if d.tool_calls]
    assert rounds == [[(0, "calculator"), (1, "echo")], [(2, "echo")]]
    calls = [t for d in deltas for t in d.tool_calls or []]
    assert all(t.id and t.type == "function" for t in calls)
    outputs = [extra(d, "tool_output") for d in deltas if extra(d, "tool_output")]
    # A round's tools run in parallel: their outputs come as each finishes.
    by_call = {o["tool_call_id"]: o for o in outputs}
    assert len(outputs) == 3 and set(by_call) == {t.id for t in calls}
    assert [by_call[t.id]["name"] for t in calls] == ["calculator", "echo", "echo"]
    # Each round's outputs come after its calls, before the next round.
    kinds = ["calls" if d.tool_calls else "output" if extra(d, "tool_output") else None for d in deltas]
    assert [k for k in kinds if k] == ["calls", "output", "output", "calls", "output"]
    assert not any(extra(c, "chatforge") for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_raw_stream_is_sse_ending_with_done(stack, fake_llm, make_user):
    fake_llm.add_script("oa-raw", [Reply(text="Hello there.", delay_s=0.5)])
    _, token = make_user()
    body = {"model": "oa-raw", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", stack.http_url + "/v1/chat/completions", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        first = next(line for line in lines if line)
        # Early metadata: the conversation exists and is named before the model answers.
        chunk = json.loads(first.removeprefix("data: "))
        assert Conversation.objects.filter(pk=chunk["conversation_id"]).exists()
        assert chunk["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
        assert response.headers["x-chatforge-run-id"] == chunk["run_id"]
        rest = [line for line in lines if line]
    assert all(line.startswith("data: ") for line in rest)
    assert rest[-1] == "data: [DONE]"
    assert not any(json.loads(line[6:]).get("usage") for line in rest[:-1])  # include_usage was not asked for


def test_non_streamed_chat_with_tool_events(stack, fake_llm, make_user):
    fake_llm.add_script("oa-json", two_rounds())
    _, token = make_user()

    completion = sdk(stack, token).chat.completions.create(
        model="oa-json", messages=[{"role": "user", "content": "What is 6*7?"}], tools=["calculator", "echo"],
    )

    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    choice = completion.choices[0]
    assert choice.message.content == " The answer is 42." and choice.finish_reason == "stop"
    assert not choice.message.tool_calls  # the server ran them
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens > 0
    events = extra(completion, "tool_events")
    assert [e["type"] for e in events] == [
        "text", "tool_call", "tool_call", "tool_output", "tool_output", "text", "tool_call", "tool_output", "text"]
    assert [e["value"] for e in events if e["type"] == "text"] == ["Let me work it out.", " One more.",
                                                                  " The answer is 42."]
    call = events[1]["value"]
    assert call["type"] == "function" and call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"expression": "6*7"}
    outputs = {e["value"]["tool_call_id"]: e["value"] for e in events if e["type"] == "tool_output"}
    assert json.loads(outputs[call["id"]]["output"])["result"] == 42
    run = Run.objects.get(pk=extra(completion, "run_id"))
    assert run.status == "completed" and str(run.conversation_id) == extra(completion, "conversation_id")


def test_stream_helper_yields_the_text_and_no_calls_to_run(stack, fake_llm, make_user):
    fake_llm.add_script("oa-helper", two_rounds())
    _, token = make_user()
    client = sdk(stack, token)

    # Bare names go in extra_body: the helper itself reads ``tools`` as full specs.
    with client.chat.completions.stream(
        model="oa-helper", messages=[{"role": "user", "content": "What is 6*7?"}],
        extra_body={"tools": ["calculator", "echo"]},
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()

    text = "".join(e.delta for e in events if e.type == "content.delta")
    assert text == "Let me work it out.\n\n One more.\n\n The answer is 42."
    assert not [e for e in events if e.type.startswith("tool_calls")]
    message = final.choices[0].message
    assert message.content == text and not message.tool_calls
    assert final.choices[0].finish_reason == "stop"


def test_stream_helper_accumulates_the_calls_when_asked_for_them(stack, fake_llm, make_user):
    fake_llm.add_script("oa-helper-specs", two_rounds())
    _, token = make_user()
    specs = [{"type": "function", "function": {"name": name, "description": "ours",
                                               "parameters": {"type": "object", "properties": {}}}}
             for name in ("calculator", "echo")]
    with sdk(stack, token).chat.completions.stream(
        model="oa-helper-specs", messages=[{"role": "user", "content": "What is 6*7?"}], tools=specs,
        extra_body={"show_tool_calls": True},
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    done = [(e.index, e.name) for e in events if e.type == "tool_calls.function.arguments.done"]
    assert done == [(0, "calculator"), (1, "echo"), (2, "echo")]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in final.choices[0].message.tool_calls] == [
        ("calculator", {"expression": "6*7"}), ("echo", {"text": "hi"}), ("echo", {"text": "again"})]
    # ChatForge's own specs reached the model, not the client's.
    sent = fake_llm.requests_for("oa-helper-specs")[0]["tools"]
    assert all(t["function"]["description"] != "ours" for t in sent)


def test_history_of_a_new_conversation_is_stored_and_continuing_sends_only_the_new_message(
    stack, fake_llm, make_user
):
    fake_llm.add_script("oa-echo", echo_user())
    _, token = make_user()
    client = sdk(stack, token)
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]

    first = client.chat.completions.create(model="oa-echo", messages=history, tool_choice="none")
    conversation_id = extra(first, "conversation_id")
    assert first.choices[0].message.content == "You said: second"
    seen = fake_llm.requests_for("oa-echo")[-1]
    assert [(m["role"], m["content"]) for m in seen["messages"]] == [
        ("system", "Be brief."), ("user", "first"), ("assistant", "noted"), ("user", "second")]
    assert not seen.get("tools")  # tool_choice "none"

    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "third"}]
    second = client.chat.completions.create(
        model="oa-echo", messages=history, extra_body={"conversation_id": conversation_id}, tool_choice="none",
    )
    assert extra(second, "conversation_id") == conversation_id
    assert second.choices[0].message.content == "You said: third"
    seen = fake_llm.requests_for("oa-echo")[-1]
    assert [(m["role"], m["content"]) for m in seen["messages"]] == [
        ("system", "Be brief."), ("user", "first"), ("assistant", "noted"), ("user", "second"),
        ("assistant", "You said: second"), ("user", "third")]
    stored = Message.objects.filter(conversation_id=conversation_id).order_by("created_at", "id")
    assert [m.role for m in stored] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]

    _, stranger = make_user()
    with pytest.raises(openai.NotFoundError) as caught:
        sdk(stack, stranger).chat.completions.create(
            model="oa-echo", messages=[{"role": "user", "content": "mine?"}],
            extra_body={"conversation_id": conversation_id})
    assert caught.value.body["code"] == "conversation_not_found"
    assert caught.value.body["param"] == "conversation_id"


def test_history_with_tool_calls_and_tool_messages_reaches_the_model_as_tool_rounds(stack, fake_llm, make_user):
    """The history a client builds from a tool-using reply (LangChain,
    LangGraph, llm) is accepted: its calls and results reach the model as
    real tool messages, and nothing in it is run again."""
    fake_llm.add_script("oa-history-tools", [Reply(text="Doubled: 84.")])
    _, token = make_user()
    call = {"id": "call_abc", "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
    completion = sdk(stack, token).chat.completions.create(model="oa-history-tools", tools=["calculator"], messages=[
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"result": 42}'},
        {"role": "assistant", "content": "It is 42."},
        {"role": "user", "content": "Doubled?"},
    ])
    assert completion.choices[0].message.content == "Doubled: 84."
    seen = fake_llm.requests_for("oa-history-tools")[-1]["messages"]
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "assistant", "user"]
    assert seen[1]["tool_calls"][0]["id"] == "call_abc" and seen[1]["tool_calls"][0]["function"]["name"] == "calculator"
    assert seen[2] == {"role": "tool", "tool_call_id": "call_abc", "content": '{"result": 42}'}
    run = Run.objects.get(pk=extra(completion, "run_id"))
    assert not ToolInvocation.objects.filter(run__conversation_id=run.conversation_id).exists()  # none ran again


@pytest.mark.parametrize(("options", "param", "text"), [
    ({"n": 2}, "n", "'n'"),
    ({"logprobs": True, "top_logprobs": 2}, "logprobs", "'top_logprobs'"),
    ({"functions": [{"name": "f", "parameters": {}}]}, "functions", "'functions'"),
    ({"response_format": {"type": "xml"}}, "response_format", "'response_format' must be"),
    ({"tool_choice": {"type": "function", "function": {"name": "calculator"}}, "tools": ["echo"]},
     "tool_choice", "not in 'tools'"),
    ({"tools": ["no_such_tool"]}, "tools", "no_such_tool"),
])
def test_refused_requests_get_openai_errors(stack, make_user, options, param, text):
    user, token = make_user()
    request = {"model": "demo", "messages": [{"role": "user", "content": "hi"}], **options}
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(stack, token).chat.completions.create(**request)
    error = caught.value.body
    assert error.keys() == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param and text in error["message"]
    assert not Conversation.objects.filter(user=user).exists()


def test_a_refused_tool_leaves_no_conversation(stack, make_user):
    user, token = make_user()
    with pytest.raises(openai.BadRequestError):
        sdk(stack, token).chat.completions.create(
            model="demo", messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}],
            tools=["no_such_tool"])
    assert not Conversation.objects.filter(user=user).exists()


def test_bad_token_and_bad_json(stack):
    with pytest.raises(openai.AuthenticationError) as caught:
        sdk(stack, "cf_not-a-token").chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 401 and caught.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        sdk(stack, "cf_not-a-token").models.list()

    response = httpx.post(stack.http_url + "/v1/chat/completions", content=b"{not json", timeout=30,
                          headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    response = httpx.get(stack.http_url + "/v1/chat/completions", timeout=30)
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"


def test_malformed_json_is_a_400(stack, make_user):
    _, token = make_user()
    response = httpx.post(stack.http_url + "/v1/chat/completions", content=b"{not json", timeout=30,
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_failed_run(stack, fake_llm, make_user):
    fake_llm.add_script("oa-broken", [Reply(fail_status=400, fail_times=10, fail_message="This model does not exist.")])
    _, token = make_user()
    client = sdk(stack, token)

    with pytest.raises(openai.APIError) as caught:
        for _ in client.chat.completions.create(
            model="oa-broken", messages=[{"role": "user", "content": "hi"}], stream=True):
            pass
    assert "The run failed" in caught.value.message

    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="oa-broken", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["code"] == "run_failed"
    assert caught.value.response.headers["x-should-retry"] == "false"


def test_a_model_its_provider_does_not_have_is_the_clients_404(stack, make_user):
    """A name no admin row knows goes to the default provider as is; the fake
    answers 404 for an unscripted model, as OpenAI does for an unknown one.
    The run that tried it fails, and the client gets OpenAI's 404, not a
    server error."""
    _, token = make_user()
    client = sdk(stack, token)

    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    body = caught.value.body
    assert body["code"] == "model_not_found" and body["param"] == "model"
    assert "'no-such-model' does not exist on its provider" in body["message"]
    assert caught.value.response.headers["x-should-retry"] == "false"
    run = Run.objects.get(pk=caught.value.response.headers["x-chatforge-run-id"])
    assert (run.status, run.error_kind) == ("failed", "not_found")

    with pytest.raises(openai.APIError) as caught:
        for _ in client.chat.completions.create(
                model="no-such-model", messages=[{"role": "user", "content": "hi"}], stream=True):
            pass
    assert caught.value.code == "model_not_found"


def test_a_streaming_client_that_disconnects_cancels_the_run(stack, fake_llm, make_user):
    slow = Reply(text=" ".join(f"word{i}" for i in range(300)), chunk_delay_s=0.1)
    fake_llm.add_script("oa-slow", [slow])
    _, token = make_user()
    body = {"model": "oa-slow", "messages": [{"role": "user", "content": "talk slowly"}], "stream": True}

    with httpx.stream("POST", stack.http_url + "/v1/chat/completions", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as response:
        data = (json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {"))
        first = next(data)
        text = next(chunk for chunk in data if chunk["choices"][0]["delta"].get("content"))
        run_id = first["run_id"]
        assert Run.objects.get(pk=run_id).status in ("queued", "running")
    # Leaving the block closed the connection mid-answer.

    run = wait_for_status(run_id, {"cancelled", "completed", "failed"})
    assert run.status == "cancelled"
    assert text["run_id"] == run_id


def test_models_list(stack, make_user):
    _, token = make_user()
    client = sdk(stack, token)
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert "demo" in ids
    demo = client.models.retrieve("demo")
    assert demo.object == "model" and demo.owned_by == "chatforge" and extra(demo, "validated") is False
    assert all(isinstance(extra(m, "validated"), bool) for m in models.data)
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("no-such-model")
    assert caught.value.body["code"] == "model_not_found"


def test_a_waiting_client_that_disconnects_cancels_the_run(stack, fake_llm, make_user):
    fake_llm.add_script("oa-slow-json", [Reply(text=" ".join(f"word{i}" for i in range(300)), chunk_delay_s=0.1)])
    user, token = make_user()
    body = {"model": "oa-slow-json", "messages": [{"role": "user", "content": "talk slowly"}]}

    with pytest.raises(httpx.ReadTimeout):
        httpx.post(stack.http_url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"},
                   timeout=httpx.Timeout(30, read=2))

    run = Run.objects.get(user=user)
    assert wait_for_status(str(run.id), {"cancelled", "completed", "failed"}).status == "cancelled"



def test_v1_conversations_are_kept_out_of_the_chat_sidebar(stack, fake_llm, make_user):
    from chatforge.web.pages import chat_page_data

    fake_llm.add_script("oa-apart", echo_user())
    user, token = make_user()
    api = httpx.Client(base_url=stack.http_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    mine = api.post("/api/conversations/", json={"title": "my own chat"}).json()["id"]
    completion = sdk(stack, token).chat.completions.create(
        model="oa-apart", messages=[{"role": "user", "content": "from   a script"}], tool_choice="none")
    from_v1 = extra(completion, "conversation_id")

    assert [c["id"] for c in chat_page_data(user, None)["conversations"]] == [mine]
    listed = {c["id"]: c for c in api.get("/api/conversations/").json()["results"]}
    assert listed[from_v1]["source"] == "openai" and listed[from_v1]["title"] == "from a script"
    assert listed[mine]["source"] == "chat"
    assert [c["id"] for c in api.get("/api/conversations/?source=openai").json()["results"]] == [from_v1]
    assert [c["id"] for c in api.get("/api/conversations/?source=chat").json()["results"]] == [mine]
    refused = api.get("/api/conversations/?source=nope")
    assert refused.status_code == 400 and "chat, openai" in refused.json()["error"]["message"]


def test_sampling_parameters_reach_the_model_and_a_forced_tool_choice_holds_for_the_first_turn(
    stack, fake_llm, make_user
):
    fake_llm.add_script("oa-sampling", [Reply(tool_calls=[("calculator", {"expression": "6*7"})]),
                                        Reply(text='{"n": 42}')])
    _, token = make_user()
    schema = {"name": "answer", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}

    completion = sdk(stack, token).chat.completions.with_raw_response.create(
        model="oa-sampling", messages=[{"role": "user", "content": "6*7 as JSON"}], tools=["calculator"],
        tool_choice="required", top_p=0.5, stop=["END"], seed=7, presence_penalty=0.1, frequency_penalty=0.2,
        response_format={"type": "json_schema", "json_schema": schema}, parallel_tool_calls=False, user="me",
    )
    assert "x-chatforge-ignored-parameters" not in completion.headers  # an OpenAI-compatible model has them all
    assert completion.parse().choices[0].message.content == '{"n": 42}'
    first, second = fake_llm.requests_for("oa-sampling")[-2:]
    for sent in (first, second):
        assert (sent["top_p"], sent["stop"], sent["seed"]) == (0.5, ["END"], 7)
        assert (sent["presence_penalty"], sent["frequency_penalty"]) == (0.1, 0.2)
        assert sent["response_format"] == {"type": "json_schema", "json_schema": schema}
        assert sent["parallel_tool_calls"] is False and sent["user"] == "me"
    # Forcing a call holds for the first turn only, else the model could never answer.
    assert first["tool_choice"] == "required" and "tool_choice" not in second


def test_parameters_the_provider_lacks_are_named_in_a_header(stack, make_user):
    from chatforge.llm.models import LanguageModel, Provider

    provider = Provider.objects.create(name="claude-here", kind="anthropic", base_url="http://127.0.0.1:9")
    LanguageModel.objects.create(name="claude-sampling", provider=provider)
    _, token = make_user()
    body = {"model": "claude-sampling", "stream": True, "messages": [{"role": "user", "content": "hi"}],
            "seed": 1, "top_p": 0.5, "stop": "END"}
    with httpx.stream("POST", stack.http_url + "/v1/chat/completions", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status_code == 200
        assert response.headers["x-chatforge-ignored-parameters"] == "seed, top_p"
