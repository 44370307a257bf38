"""Between OpenAI's Chat Completions format and ChatForge runs, both ways.

Inbound: a request body becomes a ``ChatRequest`` (the conversation so far,
the new user message and the run's options), or an ``OpenAIError`` naming
what is wrong or unsupported. Outbound: run events become
``chat.completion.chunk``s (``ChunkRenderer``, streaming) or the
``tool_events`` of a ``chat.completion`` (``ToolEventCollector``).

Nothing here touches the database.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from chatforge.api.openai_errors import OpenAIError

# Parameters ChatForge applies.
SUPPORTED = frozenset({
    "model", "messages", "tools", "tool_choice", "stream", "stream_options", "temperature",
    "max_tokens", "max_completion_tokens", "reasoning_effort", "conversation_id", "assistant",
    "show_tool_calls", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "response_format",
    "parallel_tool_calls", "user",
})
# Parameters that do not change the answer; accepted and ignored.
IGNORED = frozenset({"metadata", "store", "safety_identifier", "prompt_cache_key", "service_tier"})
# Parameters accepted only with the value that means "the default".
_DEFAULT_ONLY: dict[str, Any] = {"n": 1, "logprobs": False}

# The output given to the model for a call in a client's history whose
# result the client did not send (every call needs an answer in history).
MISSING_TOOL_RESULT = "Error: no result for this tool call was sent with the conversation."
_ROLES = ("system", "developer", "user", "assistant", "tool")
# Put between the text of successive model turns in a stream: without it
# "Let me check that." and "The time is…" ran together.
ROUND_SEPARATOR = "\n\n"
# The header that asks for server tool calls as ``tool_calls`` deltas, for
# clients that cannot add a body field (the body's ``show_tool_calls`` wins).
SHOW_TOOL_CALLS_HEADER = "X-ChatForge-Show-Tool-Calls"
# OpenAI's finish reasons; anything else the engine reports reads as "stop".
_FINISH_REASONS = frozenset({"stop", "length", "content_filter", "tool_calls"})
# A data URL of an image the providers take (base64 only).
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,")
# A file part's data: any media type (the bytes are sniffed, not the label), base64.
_DATA_URL = re.compile(r"data:[\w.+-]*/?[\w.+-]*(;[\w-]+=[^;,]*)*;base64,(?P<data>.*)\Z", re.DOTALL)
# What OpenAI accepts as a function name.
_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class FilePart:
    """A ``file`` content part: the file's bytes (``file_data``, a base64
    data URL) with its name, or the id of a file already uploaded to
    ChatForge (``file_id``). Stored as a conversation file (docs/files.md)."""

    filename: str = ""
    data: bytes | None = None
    file_id: str | None = None


@dataclass(frozen=True)
class PriorMessage:
    role: str  # "system" | "user" | "assistant"
    content: str
    # An assistant message's tool rounds, as stored on ``Message.tool_rounds``
    # (built from a client's ``tool_calls`` and ``tool`` messages).
    tool_rounds: list[dict[str, Any]] | None = None
    images: tuple[str, ...] = ()  # a user message's image URLs
    files: tuple[FilePart, ...] = ()  # a user message's files


@dataclass(frozen=True)
class ChatRequest:
    model: str
    content: str  # the new user message
    images: list[str] = field(default_factory=list)  # its image URLs (data: or http(s):)
    files: list[FilePart] = field(default_factory=list)  # its files
    prior: list[PriorMessage] = field(default_factory=list)  # earlier messages (new conversations only)
    tools: list[str] | None = None  # None: the default tools (CHATFORGE_OPENAI_DEFAULT_TOOLS); []: none
    # The full function specs among ``tools``, by name: a server tool's name
    # refers to the server's tool; any other is the client's own tool
    # (services.split_tools decides, against the catalog).
    tool_specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The tool rounds after the last user message: the client's results for
    # the calls the previous response asked it to make (compact rounds).
    continued: list[dict[str, Any]] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    conversation_id: str | None = None
    assistant: str = ""
    # top_p, stop, seed, penalties, response_format, parallel_tool_calls and a
    # forcing tool_choice, checked; each provider applies what it has
    # (chatforge/llm/providers/sampling.py).
    sampling: dict[str, Any] = field(default_factory=dict)
    # Stream the server's tool calls as standard ``tool_calls`` deltas (for
    # clients that know ChatForge ran them; docs/openai-api.md, "Server tools
    # in a stream"). Off by default: every other client takes such deltas as
    # calls to run itself (docs/decisions/0015-server-tools-hidden-from-v1-clients.md).
    show_tool_calls: bool = False


def _invalid(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(message, status=400, param=param, code=code)


def _unsupported(names: list[str], why: str = "") -> OpenAIError:
    listed = ", ".join(f"'{n}'" for n in names)
    plural = "s" if len(names) > 1 else ""
    return _invalid(
        f"Unsupported parameter{plural}: {listed}. {why}ChatForge supports: "
        f"{', '.join(sorted(SUPPORTED))}.",
        param=names[0],
        code="unsupported_parameter",
    )


def _check_unsupported(body: Mapping[str, Any]) -> None:
    unsupported: list[str] = []
    for key, value in body.items():
        if key in SUPPORTED or key in IGNORED or value is None:
            continue
        if key in _DEFAULT_ONLY and value == _DEFAULT_ONLY[key]:
            continue
        if key == "modalities" and isinstance(value, list) and all(m == "text" for m in value):
            continue
        unsupported.append(key)
    if unsupported:
        raise _unsupported(sorted(unsupported))


def _text_of(content: Any, *, where: str) -> str:
    """A message's text: a string, or an array of text parts."""
    text, images, files = _content_of(content, where=where)
    if images or files:
        raise _invalid(f"{where}: images and files are accepted in user messages only.", param="messages")
    return text


def _content_of(content: Any, *, where: str) -> tuple[str, list[str], list[FilePart]]:
    """A message's text, image URLs and files: a string, or an array of
    ``text``, ``image_url`` (``data:image/…;base64,…`` or ``http(s)://``)
    and ``file`` parts."""
    if content is None:
        return "", [], []
    if isinstance(content, str):
        return content, [], []
    if not isinstance(content, list):
        raise _invalid(f"{where}: content must be a string or an array of content parts.", param="messages")
    texts: list[str] = []
    images: list[str] = []
    files: list[FilePart] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            images.append(_image_url(part.get("image_url"), f"{where}.content[{j}]"))
        elif kind == "file":
            files.append(_file_part(part.get("file"), f"{where}.content[{j}]"))
        else:
            raise _invalid(
                f"{where}: content part of type '{kind}' is not supported; ChatForge accepts text, "
                'images and files (parts {"type": "text", "text": "..."}, {"type": "image_url", '
                '"image_url": {"url": "..."}} and {"type": "file", "file": {"filename": "...", '
                '"file_data": "data:...;base64,..."}}).',
                param="messages",
            )
    return "\n".join(texts), images, files


def _file_part(value: Any, where: str) -> FilePart:
    if isinstance(value, Mapping):
        file_id, data, name = value.get("file_id"), value.get("file_data"), value.get("filename")
        if isinstance(file_id, str) and file_id and data is None:
            return FilePart(file_id=file_id)
        if isinstance(data, str) and (name is None or isinstance(name, str)):
            match = _DATA_URL.match(data)
            if match is not None:
                try:
                    decoded = base64.b64decode(match["data"], validate=True)
                except binascii.Error:
                    raise _invalid(f"{where}: 'file_data' is not valid base64.", param="messages") from None
                return FilePart(filename=name or "file", data=decoded)
    raise _invalid(
        f"{where}: a file must be {{\"file\": {{\"filename\": \"report.pdf\", \"file_data\": "
        "\"data:application/pdf;base64,...\"}}} (the bytes as a base64 data URL) or "
        "{\"file\": {\"file_id\": \"...\"}} with the id of a file uploaded to POST /api/files/.",
        param="messages",
    )


def _image_url(value: Any, where: str) -> str:
    url = value.get("url") if isinstance(value, Mapping) else None
    if isinstance(url, str) and (_DATA_IMAGE.match(url) or url.startswith(("https://", "http://"))):
        return url
    raise _invalid(
        f"{where}: an image must be {{\"image_url\": {{\"url\": ...}}}} with a base64 data URL "
        "(data:image/png;base64,...; png, jpeg, gif or webp) or an http(s) URL.",
        param="messages",
    )


class _HistoryBuilder:
    """A client's messages as ChatForge history. An assistant message with
    ``tool_calls`` and the ``tool`` messages answering it become one tool
    round of the assistant message that follows them (as the engine stores
    its own rounds), so the model sees them as real calls and results.
    Clients send such history back after any tool-using reply (LangChain,
    LangGraph, ``llm``); it used to be refused."""

    def __init__(self) -> None:
        self.messages: list[PriorMessage] = []
        self._rounds: list[dict[str, Any]] = []

    def add(self, role: str, message: Mapping[str, Any], text: str, where: str, images: tuple[str, ...] = (),
            files: tuple[FilePart, ...] = ()) -> None:
        if role == "assistant" and message.get("tool_calls"):
            self._rounds.append({
                "iteration": len(self._rounds), "assistant_response": text,
                "tool_calls": _client_tool_calls(message["tool_calls"], where), "results": [],
            })
        elif role == "tool":
            self._add_result(message, text)
        elif role == "assistant":
            self.messages.append(PriorMessage(role="assistant", content=text, tool_rounds=self._take_rounds()))
        else:
            self._close_rounds()
            self.messages.append(PriorMessage(role="system" if role == "developer" else role, content=text,
                                              images=images, files=files))

    def _add_result(self, message: Mapping[str, Any], text: str) -> None:
        call_id = message.get("tool_call_id")
        for round_ in reversed(self._rounds):
            for call in round_["tool_calls"]:
                if call["id"] == call_id:
                    round_["results"].append({"tool_call_id": call_id, "name": call["name"], "output": text,
                                              "status": "success", "execution_time_ms": 0})
                    return
        # A result for no call of this history cannot be shown to a model: left out.

    def _take_rounds(self) -> list[dict[str, Any]] | None:
        rounds, self._rounds = self._rounds, []
        for round_ in rounds:
            answered = {r["tool_call_id"] for r in round_["results"]}
            round_["results"] += [{"tool_call_id": c["id"], "name": c["name"], "output": MISSING_TOOL_RESULT,
                                   "status": "error", "execution_time_ms": 0}
                                  for c in round_["tool_calls"] if c["id"] not in answered]
        return rounds or None

    def asked_for(self, call_id: Any) -> bool:
        return any(call["id"] == call_id for round_ in self._rounds for call in round_["tool_calls"])

    def open_rounds(self) -> list[dict[str, Any]]:
        """The rounds no assistant answer has closed yet (every call given a result)."""
        return self._take_rounds() or []

    def _close_rounds(self) -> None:
        rounds = self._take_rounds()
        if rounds:
            self.messages.append(PriorMessage(role="assistant", content="", tool_rounds=rounds))


def _client_tool_calls(raw: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(raw, list):
        raise _invalid(f"{where}: 'tool_calls' must be an array.", param="messages")
    calls = []
    for j, call in enumerate(raw):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise _invalid(f"{where}.tool_calls[{j}] must be "
                           '{"id", "type": "function", "function": {"name", "arguments"}}.', param="messages")
        arguments = function.get("arguments")
        calls.append({"id": str(call.get("id") or f"call_{j}"), "name": function["name"],
                      "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})})
    return calls


def _messages(raw: Any) -> tuple[list[PriorMessage], str, list[str], list[FilePart], list[dict[str, Any]]]:
    """``(earlier messages, the last user message's text, images and files,
    the tool rounds after it)``.
    After the last user message only tool rounds may follow: the assistant's
    calls of the client's tools and the client's ``tool`` results, which
    the answer carries on from."""
    if not isinstance(raw, list) or not raw:
        raise _invalid("'messages' must be a non-empty array of messages.", param="messages")
    roles = [_role_of(message, f"messages[{i}]") for i, message in enumerate(raw)]
    last_user = max((i for i, role in enumerate(roles) if role == "user"), default=None)
    if last_user is None:
        raise _invalid("'messages' has no user message: ChatForge answers the last user message.",
                       param="messages")
    history = _HistoryBuilder()
    for i, message in enumerate(raw[:last_user]):
        where = f"messages[{i}]"
        if roles[i] == "user":
            text, images, files = _content_of(message.get("content"), where=where)
            history.add("user", message, text, where, tuple(images), tuple(files))
        else:
            history.add(roles[i], message, _text_of(message.get("content"), where=where), where)
    where = f"messages[{last_user}]"
    history.add("user", {}, "", where)  # closes a tool round left open before the user's message
    prior = [m for m in history.messages[:-1] if m.content or m.tool_rounds or m.images or m.files]
    content, images, files = _content_of(raw[last_user].get("content"), where=where)
    return prior, content, images, files, _continued_rounds(raw, roles, last_user)


def _continued_rounds(raw: list[Any], roles: list[str], last_user: int) -> list[dict[str, Any]]:
    trailing = _HistoryBuilder()
    for i in range(last_user + 1, len(raw)):
        message, where = raw[i], f"messages[{i}]"
        if roles[i] not in ("assistant", "tool") or (roles[i] == "assistant" and not message.get("tool_calls")):
            raise _invalid(
                f"{where}: after the last user message only the assistant's 'tool_calls' and the "
                f"'tool' messages with their results may follow (it is '{roles[i]}'"
                f"{' without tool_calls' if roles[i] == 'assistant' else ''}): ChatForge answers the last "
                "user message.",
                param="messages",
            )
        if roles[i] == "tool" and not trailing.asked_for(message.get("tool_call_id")):
            raise _invalid(
                f"{where}: a result for the call '{message.get('tool_call_id')}', which no assistant message "
                "after the last user message asked for: each 'tool' message answers one of the calls in "
                "the 'tool_calls' of the assistant message before it.",
                param="messages",
            )
        trailing.add(roles[i], message, _text_of(message.get("content"), where=where), where)
    if len(raw) > last_user + 1 and roles[-1] != "tool":
        raise _invalid(
            f"messages[{len(raw) - 1}] asks for tool calls, and no results follow: send each call's "
            "result as a {\"role\": \"tool\", \"tool_call_id\", \"content\"} message after it.",
            param="messages",
        )
    return trailing.open_rounds()


def _role_of(message: Any, where: str) -> str:
    if not isinstance(message, Mapping):
        raise _invalid(f"{where} must be an object with 'role' and 'content'.", param="messages")
    role = message.get("role")
    if role not in _ROLES:
        raise _invalid(f"{where}: unknown role {role!r}; use one of {', '.join(_ROLES)}.", param="messages")
    if message.get("function_call"):
        raise _invalid(f"{where}: 'function_call' (OpenAI's old function calling) is not supported; "
                       "use 'tool_calls'.", param="messages", code="unsupported_parameter")
    return role


def _tools(raw: Any) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``(names, the full specs among them by name)``. A bare name, or a spec
    with only a name, names a server tool; a spec with a description or
    parameters may be a client's own tool (decided against the catalog)."""
    if not isinstance(raw, list):
        raise _invalid("'tools' must be an array of tool names or function tool specs.", param="tools")
    names: list[str] = []
    specs: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(raw):
        if isinstance(tool, str):
            name = tool
        elif isinstance(tool, Mapping) and tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
            name = tool["function"].get("name")
        elif isinstance(tool, Mapping) and tool.get("type") not in (None, "function"):
            raise _invalid(
                f"tools[{i}]: tools of type '{tool.get('type')}' are not supported; use function tools "
                "from ChatForge's catalog (GET /api/tools/).",
                param="tools",
            )
        else:
            raise _invalid(
                f"tools[{i}] must be a tool name or "
                '{"type": "function", "function": {"name": "..."}}.',
                param="tools",
            )
        if not isinstance(name, str) or not name:
            raise _invalid(f"tools[{i}] has no function name.", param="tools")
        names.append(name)
        if isinstance(tool, Mapping) and ({"description", "parameters"} & set(tool["function"])):
            specs[name] = _function_spec(tool["function"], f"tools[{i}]")
    return list(dict.fromkeys(names)), specs


def _function_spec(function: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A client's function spec as the engine offers it to models: checked
    for what providers refuse (a name outside [a-zA-Z0-9_-]{1,64}, a
    ``parameters`` that is not a JSON Schema object)."""
    name = function["name"]
    if not _FUNCTION_NAME.fullmatch(name):
        raise _invalid(f"{where}: the function name '{name}' must be 1 to 64 letters, digits, '_' or '-'.",
                       param="tools")
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        raise _invalid(f"{where}: 'description' must be a string.", param="tools")
    parameters = function.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping):
        raise _invalid(f"{where}: 'parameters' must be a JSON Schema object.", param="tools")
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        raise _invalid(f"{where}: 'parameters' is not a valid JSON Schema: {exc.message}.", param="tools") from None
    spec: dict[str, Any] = {"name": name, "description": description or "", "parameters": dict(parameters)}
    if isinstance(function.get("strict"), bool):
        spec["strict"] = function["strict"]
    return {"type": "function", "function": spec}


def _tool_choice(raw: Any, tools: list[str] | None) -> tuple[bool, Any]:
    """``(tools allowed, the choice to send)``: "none" offers no tools at
    all; "required" and a named function force a call on the first turn."""
    if raw is None or raw == "auto":
        return True, None
    if raw == "none":
        return False, None
    if raw == "required":
        return True, "required"
    if isinstance(raw, Mapping) and raw.get("type") == "function":
        function = raw.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise _invalid('tool_choice must name its function: {"type": "function", "function": {"name": "..."}}.',
                           param="tool_choice")
        if tools is not None and name not in tools:
            raise _invalid(f"tool_choice names '{name}', which is not in 'tools' ({', '.join(tools) or 'none'}).",
                           param="tool_choice")
        return True, {"type": "function", "function": {"name": name}}
    shown = json.dumps(raw) if not isinstance(raw, str) else f"'{raw}'"
    raise _invalid(
        f"tool_choice {shown} is not supported: use 'auto', 'none', 'required' or "
        '{"type": "function", "function": {"name": "..."}}.',
        param="tool_choice",
        code="unsupported_value",
    )


def _stop(value: Any) -> str | list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) and value:
        return value
    if (isinstance(value, list) and 0 < len(value) <= 4
            and all(isinstance(v, str) and v for v in value)):
        return value
    raise _invalid("'stop' must be a non-empty string or an array of 1 to 4 non-empty strings.", param="stop")


def _response_format(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema", {}), Mapping):
            raise _invalid("response_format json_schema needs 'json_schema': {\"name\", \"schema\": {...}}.",
                           param="response_format")
        return {"type": "json_schema", "json_schema": dict(spec)}
    raise _invalid("'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                   "{\"type\": \"json_schema\", \"json_schema\": {...}}.", param="response_format")


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise _invalid("'seed' must be an integer.", param="seed")
    return value


def _sampling(body: Mapping[str, Any], tool_choice: Any) -> dict[str, Any]:
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _invalid("'parallel_tool_calls' must be true or false.", param="parallel_tool_calls")
    sampling = {
        "top_p": _number(body, "top_p", low=0, high=1),
        "stop": _stop(body.get("stop")),
        "seed": _seed(body.get("seed")),
        "presence_penalty": _number(body, "presence_penalty", low=-2, high=2),
        "frequency_penalty": _number(body, "frequency_penalty", low=-2, high=2),
        "response_format": _response_format(body.get("response_format")),
        "parallel_tool_calls": parallel,
        "tool_choice": tool_choice,
        "user": _end_user(body.get("user")),
    }
    return {key: value for key, value in sampling.items() if value is not None}


def _end_user(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 256:
        raise _invalid("'user' must be a string of at most 256 characters.", param="user")
    return value


def _number(body: Mapping[str, Any], name: str, *, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise _invalid(f"'{name}' must be a number from {low:g} to {high:g}.", param=name)
    return float(value)


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _invalid(f"'{name}' must be a positive integer.", param=name)
        return value
    return None


def _optional_str(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _invalid(f"'{name}' must be a non-empty string.", param=name)
    return value


def _show_tool_calls(body: Mapping[str, Any], header: str | None) -> bool:
    value = body.get("show_tool_calls")
    if value is None:
        return (header or "").strip().lower() in ("1", "true", "yes", "show")
    if not isinstance(value, bool):
        raise _invalid("'show_tool_calls' must be true or false.", param="show_tool_calls")
    return value


def parse_chat_request(body: Any, *, show_tool_calls_header: str | None = None) -> ChatRequest:
    """Check a ``POST /v1/chat/completions`` body; unsupported parameters and
    anything that cannot be honoured is refused with a message that names it."""
    if not isinstance(body, Mapping):
        raise _invalid("The request body must be a JSON object.")
    _check_unsupported(body)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("'model' is required: a model name from GET /v1/models.", param="model")
    prior, content, images, files, continued = _messages(body.get("messages"))
    conversation_id = _optional_str(body, "conversation_id")
    if conversation_id is not None:
        if continued:
            raise _invalid(
                "Tool results after the last user message continue a response as OpenAI clients do: "
                "send the whole conversation in 'messages', without 'conversation_id'.",
                param="conversation_id",
            )
        prior = []  # the stored conversation is the history: only the last user message is new
    tools: list[str] | None = None
    tool_specs: dict[str, dict[str, Any]] = {}
    if body.get("tools"):
        tools, tool_specs = _tools(body["tools"])
    elif body.get("tools") is not None and not isinstance(body["tools"], list):
        _tools(body["tools"])  # the error for a 'tools' that is not an array
    # An empty 'tools' (OpenAI itself refuses one) reads as absent: it is
    # what litellm sends for tools given by name (it drops every entry that
    # is not a spec). "No tools" is tool_choice "none".
    tools_allowed, tool_choice = _tool_choice(body.get("tool_choice"), tools)
    if not tools_allowed:
        tools, tool_specs = [], {}
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise _invalid("'stream' must be true or false.", param="stream")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, Mapping):
        raise _invalid("'stream_options' must be an object.", param="stream_options")
    extra = sorted(set(stream_options) - {"include_usage", "include_obfuscation"})
    if extra:
        raise _unsupported([f"stream_options.{k}" for k in extra])
    return ChatRequest(
        model=model.strip(),
        content=content,
        images=images,
        files=files,
        prior=prior,
        tools=tools,
        tool_specs=tool_specs,
        continued=continued,
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
        temperature=_number(body, "temperature", low=0, high=2),
        max_tokens=_max_tokens(body),
        reasoning_effort=_optional_str(body, "reasoning_effort"),
        conversation_id=conversation_id,
        assistant=_optional_str(body, "assistant") or "",
        show_tool_calls=_show_tool_calls(body, show_tool_calls_header),
        sampling=_sampling(body, tool_choice),
    )


# ---------------------------------------------------------------------------
# Outbound
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallOut:
    id: str
    name: str
    arguments: str

    def as_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def finish_reason(value: Any) -> str:
    return value if value in _FINISH_REASONS else "stop"


def openai_usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    result: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
    }
    if usage.get("reasoning_tokens") is not None:
        result["completion_tokens_details"] = {"reasoning_tokens": int(usage["reasoning_tokens"])}
    if usage.get("cached_tokens") is not None:
        result["prompt_tokens_details"] = {"cached_tokens": int(usage["cached_tokens"])}
    return result


def sse(payload: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"


@dataclass
class ChunkRenderer:
    """``chat.completion.chunk``s of one response (docs/openai-api.md, "The
    streamed answer").

    Every chunk has the same ``id``/``created`` and carries the run's
    ``conversation_id`` and ``run_id`` at top level. Tool calls are numbered
    0, 1, 2… across the WHOLE response, not per round: the SDK's accumulator
    merges ``tool_calls`` entries by ``index`` and concatenates their strings,
    so a second round restarting at 0 would glue its id, name and arguments
    onto the first round's call. With rising indexes the accumulated message
    lists every call the run made, each intact.
    """

    completion_id: str
    created: int
    model: str
    conversation_id: str
    run_id: str
    next_index: int = 0

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "conversation_id": self.conversation_id,
            "run_id": self.run_id,
        }

    def first(self) -> dict[str, Any]:
        """Sent before any model output, so the client knows the conversation and
        run at once (docs/openai-api.md, "The streamed answer")."""
        return self._chunk({"role": "assistant", "content": "", "refusal": None})

    def text(self, text: str) -> dict[str, Any]:
        return self._chunk({"content": text})

    def reasoning(self, text: str) -> dict[str, Any]:
        return self._chunk({"reasoning": text})

    def tool_calls(self, calls: list[ToolCallOut]) -> dict[str, Any]:
        """One round's calls in one chunk, each call's first and only fragment."""
        entries = []
        for call in calls:
            entries.append({"index": self.next_index, **call.as_openai()})
            self.next_index += 1
        return self._chunk({"tool_calls": entries})

    def tool_output(self, *, tool_call_id: str, name: str, output: str) -> dict[str, Any]:
        return self._chunk({"tool_output": {"tool_call_id": tool_call_id, "name": name, "output": output}})

    def server_tool_event(self, kind: str, value: dict[str, Any]) -> dict[str, Any]:
        """A server tool's call or output where clients do not look for work:
        an empty delta, and the event in the top-level ``chatforge`` object
        (``{"tool_call": {...}}`` or ``{"tool_output": {...}}``)."""
        chunk = self._chunk({})
        chunk["chatforge"] = {kind: value}
        return chunk

    def finish(self, reason: str) -> dict[str, Any]:
        return self._chunk({}, finish=finish_reason(reason))

    def usage(self, usage: Mapping[str, Any] | None) -> dict[str, Any]:
        chunk = self._chunk({})
        chunk["choices"] = []
        chunk["usage"] = openai_usage(usage)
        return chunk


@dataclass
class ToolEventCollector:
    """The ``tool_events`` of a non-streamed answer (docs/openai-api.md, "The
    non-streamed answer"): text, tool calls and tool outputs in the order they
    happened. Text is kept per model turn, so a turn that is retried after
    streaming some text (``llm.retry`` with ``discard_text``, or a turn that
    starts again because its worker died) contributes only its final text."""

    events: list[dict[str, Any]] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)
    _seen_iterations: set[int] = field(default_factory=set)

    def _flush_text(self) -> None:
        if self._text:
            self.events.append({"type": "text", "value": "".join(self._text)})
            self._text = []

    def on_event(self, event: Mapping[str, Any]) -> None:
        kind, data = event.get("type"), event.get("data") or {}
        if kind == "content.delta":
            self._text.append(data.get("text", ""))
        elif kind == "llm.started":
            iteration = data.get("iteration")
            if iteration in self._seen_iterations:
                self._text = []  # the turn runs again: what it streamed before is void
            self._seen_iterations.add(iteration)
        elif kind == "llm.retry" and data.get("discard_text"):
            self._text = []
        elif kind == "tool_output":
            self._flush_text()
            self.events.append({"type": "tool_output", "value": {
                "tool_call_id": data.get("tool_call_id"), "name": data.get("name"), "output": data.get("output"),
            }})

    def on_tool_calls(self, calls: list[ToolCallOut]) -> None:
        self._flush_text()
        self.events.extend({"type": "tool_call", "value": call.as_openai()} for call in calls)

    def finish(self) -> list[dict[str, Any]]:
        self._flush_text()
        return self.events


def completion_body(
    *,
    completion_id: str,
    created: int,
    model: str,
    content: str,
    finish: str,
    usage: Mapping[str, Any] | None,
    tool_events: list[dict[str, Any]],
    conversation_id: str,
    run_id: str,
    tool_calls: list[ToolCallOut] = (),
) -> dict[str, Any]:
    """A ``chat.completion`` plus ChatForge's fields (docs/openai-api.md, "The
    non-streamed answer"). The message's ``tool_calls`` are only calls of the
    client's own tools (the client's to run); the server's calls are in
    ``tool_events``, and a client must not run them again."""
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if tool_calls else ""),
                               "refusal": None}
    if tool_calls:
        message["tool_calls"] = [call.as_openai() for call in tool_calls]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason(finish),
        }],
        "usage": openai_usage(usage),
        "tool_events": tool_events,
        "conversation_id": conversation_id,
        "run_id": run_id,
    }
