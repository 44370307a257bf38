"""The clients people build on, against the live stack: LangChain's
``ChatOpenAI`` (invoke, stream, bind_tools with a server tool and with a
client tool, LangGraph ReAct agents over two turns and with a client tool,
with_structured_output), litellm (streamed and not, tools by name),
the ``llm`` CLI (a two-turn chat after a tool-using reply) and the Vercel AI
SDK (npm, ``vercel_ai/``: generateText then streamText). Each must
finish multi-turn tool-using conversations without an error, and every
server tool must run exactly once per call the model made (counted in the
ledger): none of them may take ChatForge's calls as work of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chatforge.conversations.models import Conversation, ToolInvocation
from tests.fakes.openai_server import Reply, last_user_text, tool_results

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# litellm fetches its model price list from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def calculate_then_answer():
    """Each user question: one calculator call, then an answer that quotes the result."""

    def script(body):
        results = tool_results(body)
        if not results and body.get("tools"):
            return Reply(text="Let me calculate.", tool_calls=[("calculator", {"expression": "6*7"})])
        return Reply(text=f"The answer to '{last_user_text(body)}' is {json.loads(results[-1]['content'])['result']}."
                     if results else f"No tools needed for '{last_user_text(body)}'.")

    return script


def calculator_runs(token_user) -> int:
    return ToolInvocation.objects.filter(run__user=token_user, name="calculator", status="success").count()


def chat_openai(stack, token, model, **options):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60,
                      **options)


def test_langchain_invoke_stream_and_bind_tools(stack, fake_llm, make_user):
    from langchain_core.messages import HumanMessage

    fake_llm.add_script("lc-chat", calculate_then_answer())
    user, token = make_user()
    llm = chat_openai(stack, token, "lc-chat")

    answer = llm.invoke("What is 6*7?")
    assert answer.content == "The answer to 'What is 6*7?' is 42." and not answer.tool_calls

    chunks = list(llm.stream("And again?"))
    streamed = "".join(chunk.content for chunk in chunks)
    assert streamed == "Let me calculate.\n\nThe answer to 'And again?' is 42."
    assert not any(chunk.tool_call_chunks for chunk in chunks)

    # A server tool bound by its spec: ChatForge runs it; LangChain sees no call to make.
    spec = {"type": "function", "function": {"name": "calculator", "description": "Evaluate arithmetic.",
                                             "parameters": {"type": "object", "properties": {
                                                 "expression": {"type": "string"}}}}}
    history = [HumanMessage("What is 6*7?")]
    reply = llm.bind_tools([spec]).invoke(history)
    assert not reply.tool_calls and reply.content.endswith("is 42.")
    history += [reply, HumanMessage("Thanks. Once more?")]
    again = llm.bind_tools([spec]).invoke(history)
    assert not again.tool_calls and again.content.endswith("is 42.")
    assert calculator_runs(user) == 4  # one per question, none run twice


def test_a_langchain_agent_over_two_turns(stack, fake_llm, make_user):
    """LangChain 1's ``create_agent`` (the LangGraph agent that replaced
    ``langgraph.prebuilt.create_react_agent``) runs every tool call it is
    shown, so the server's own calls must never reach it."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    client_side_runs = []

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        client_side_runs.append(expression)
        return "client-side result"

    fake_llm.add_script("lg-agent", calculate_then_answer())
    user, token = make_user()
    # Streaming, as the agent that ran ChatForge's calls again was.
    agent = create_agent(chat_openai(stack, token, "lg-agent", streaming=True), tools=[calculator])

    state = agent.invoke({"messages": [("user", "What is 6*7?")]})
    assert state["messages"][-1].content == "Let me calculate.\n\nThe answer to 'What is 6*7?' is 42."
    state = agent.invoke({"messages": [*state["messages"], ("user", "Double-check it?")]})
    assert state["messages"][-1].content == "Let me calculate.\n\nThe answer to 'Double-check it?' is 42."
    assert client_side_runs == []  # the agent never ran the tool itself
    assert calculator_runs(user) == 2


def weather_then_answer():
    """Asks the client's get_weather (and the server's calculator when the
    question has a '*'), then answers from the results."""

    def script(body):
        results = tool_results(body)
        weather = [r["content"] for r in results if "°C" in r["content"]]
        if not weather:
            calls = [("get_weather", {"city": "Paris"})]
            if "*" in last_user_text(body):
                calls.insert(0, ("calculator", {"expression": "6*7"}))
            return Reply(text="Checking.", tool_calls=calls)
        return Reply(text=f"Paris: {weather[-1]}; {len(results)} tool results.")

    return script


def test_langchain_bind_tools_with_a_client_tool_streamed_and_not(stack, fake_llm, make_user):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21 °C"

    fake_llm.add_script("lc-client-tool", weather_then_answer())
    user, token = make_user()
    for streaming in (False, True):
        llm = chat_openai(stack, token, "lc-client-tool", streaming=streaming).bind_tools([get_weather])
        history = [HumanMessage("Weather in Paris?")]
        reply = llm.invoke(history)
        assert [call["name"] for call in reply.tool_calls] == ["get_weather"]
        assert reply.response_metadata["finish_reason"] == "tool_calls"
        history += [reply, ToolMessage(get_weather.invoke(reply.tool_calls[0]["args"]),
                                       tool_call_id=reply.tool_calls[0]["id"])]
        final = llm.invoke(history)
        assert final.content == "Paris: Sunny, 21 °C; 1 tool results." and not final.tool_calls
    assert not ToolInvocation.objects.filter(run__user=user).exclude(status="client").exists()


def test_a_langchain_agent_with_a_client_tool_and_a_server_tool(stack, fake_llm, make_user):
    """The agent runs its own get_weather; its ``calculator`` has the server
    tool's name and parameters, so ChatForge runs it (once) and the agent's
    copy never runs. The model sees both results in the agent's next request."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    ran_here = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran_here.append(("get_weather", city))
        return "Sunny, 21 °C"

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        ran_here.append(("calculator", expression))
        return "client-side result"

    fake_llm.add_script("lg-client-tool", weather_then_answer())
    user, token = make_user()
    agent = create_agent(chat_openai(stack, token, "lg-client-tool", streaming=True),
                         tools=[get_weather, calculator])
    state = agent.invoke({"messages": [("user", "Weather in Paris, and 6*7?")]})
    assert state["messages"][-1].content == "Paris: Sunny, 21 °C; 2 tool results."
    assert ran_here == [("get_weather", "Paris")] and calculator_runs(user) == 1


def test_langchain_structured_output(stack, fake_llm, make_user):
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int
        unit: str

    def script(body):
        assert body.get("response_format", {}).get("type") == "json_schema", body.get("response_format")
        return Reply(text=json.dumps({"value": 42, "unit": "apples"}))

    fake_llm.add_script("lc-structured", script)
    _, token = make_user()
    result = chat_openai(stack, token, "lc-structured").with_structured_output(Answer).invoke("How many apples?")
    assert result == Answer(value=42, unit="apples")


@pytest.mark.parametrize("stream", [False, True])
def test_litellm_with_tools_by_name(stack, fake_llm, make_user, stream):
    import litellm

    model = f"litellm-{'stream' if stream else 'plain'}"
    fake_llm.add_script(model, calculate_then_answer())
    user, token = make_user()
    common = {"model": f"openai/{model}", "api_base": stack.http_url + "/v1", "api_key": token,
              "tools": ["calculator"], "stream": stream, "num_retries": 0, "timeout": 60}

    messages = [{"role": "user", "content": "What is 6*7?"}]
    for question in ("What is 6*7?", "Sure?"):
        messages[-1] = {"role": "user", "content": question}
        response = litellm.completion(messages=messages, **common)
        if stream:
            text = "".join(chunk.choices[0].delta.content or "" for chunk in response if chunk.choices)
            assert text.endswith(f"The answer to '{question}' is 42.")
        else:
            text = response.choices[0].message.content
            assert text == f"The answer to '{question}' is 42." and not response.choices[0].message.tool_calls
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": ""}]
    # litellm sends "tools": [] for names: ChatForge's default tools ran.
    assert fake_llm.requests_for(model)[0]["tools"]
    assert calculator_runs(user) == 2


def test_the_llm_cli_chats_over_two_turns_after_a_tool_using_reply(stack, fake_llm, make_user, tmp_path: Path):
    fake_llm.add_script("llm-cli", calculate_then_answer())
    user, token = make_user()
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: chatforge\n  model_name: llm-cli\n  api_base: {stack.http_url}/v1\n  api_key_name: chatforge\n"
    )
    (tmp_path / "keys.json").write_text(json.dumps({"chatforge": token}))
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path)}

    def llm_cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "llm", *args], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert llm_cli("-m", "chatforge", "What is 6*7?") == "Let me calculate.\n\nThe answer to 'What is 6*7?' is 42."
    assert llm_cli("-c", "Really?") == "Let me calculate.\n\nThe answer to 'Really?' is 42."
    second = fake_llm.requests_for("llm-cli")[-2]["messages"]
    # The history came back as text and is the stored conversation, which
    # goes on (docs/decisions/0032): the model sees the first turn's tool round too.
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "assistant", "user"]
    assert Conversation.objects.filter(user=user).count() == 1
    assert calculator_runs(user) == 2


def test_the_vercel_ai_sdk_over_two_turns(stack, fake_llm, make_user, tmp_path: Path):
    """No tools named: the server's default tools run, and the SDK, which
    raised AI_NoSuchToolError on ChatForge's calls, sees only the answer."""
    fake_llm.add_script("vercel-ai", calculate_then_answer())
    user, token = make_user()
    project = tmp_path / "vercel_ai"
    shutil.copytree(Path(__file__).parent / "vercel_ai", project, ignore=shutil.ignore_patterns("node_modules"))
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=project, check=True, capture_output=True,
                   timeout=300)
    env = {**os.environ, "CHATFORGE_BASE_URL": stack.http_url + "/v1", "CHATFORGE_TOKEN": token,
           "CHATFORGE_MODEL": "vercel-ai"}
    done = subprocess.run(["node", "chat.mjs"], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["generated"] == "The answer to 'What is 6*7?' is 42."
    assert seen["streamed"] == "Let me calculate.\n\nThe answer to 'Sure?' is 42."
    assert (seen["generatedToolCalls"], seen["streamedToolCalls"], seen["finishReason"]) == (0, 0, "stop")
    assert calculator_runs(user) == 2
