"""Adapter for the Gemini API (``generateContent`` / ``streamGenerateContent``)
through the official ``google-genai`` SDK.

The SDK does HTTP, SSE framing and response parsing; this module maps
messages (``_gemini_messages``), options and results, and errors
(``_gemini_errors``). Choices worth knowing:

* **No SDK retries** (``HttpRetryOptions(attempts=1)``): the engine retries turns.
* **Timeouts.** The SDK takes one timeout per request, which httpx applies to
  every phase (connect, each read). Streaming uses ``idle_timeout_s`` there, so
  a stream silent for that long fails as STALLED, and ``timeout_s`` bounds the
  whole stream (checked between chunks). A non-streaming call waits in a single
  read, so it gets ``timeout_s``. ``X-Server-Timeout`` (the server-side deadline
  the SDK would otherwise derive from the idle timeout) is ``timeout_s``.
* **Cancellation.** The SDK gives no handle on the HTTP response, so our own
  ``httpx.Client`` hands it over through a response hook, and closing the
  generator closes it: the server sees the disconnect at once.
* **Function calls** arrive whole. Gemini may leave out ``functionCall.id``;
  then a stable id ``call_<hash of response id, position, name, args>`` is made
  (unique across rounds, as the response id is) and never sent back.
* **Thought signatures.** The SDK reads a part's ``thoughtSignature`` as bytes;
  ``ToolCall.metadata["thought_signature"]`` keeps it as standard base64 (what
  Gemini sends) and it goes back on the same part. The SDK itself writes bytes
  as URL-safe base64, so a signature with ``+``/``/`` goes back with ``-``/``_``:
  the same bytes, which Gemini's proto-JSON parser accepts in either alphabet
  (this is what the SDK's own chat history does on every Gemini 3 call).
* **Options.** ``temperature`` → ``temperature``; ``max_tokens`` →
  ``max_output_tokens``; ``reasoning_effort`` → ``thinking_config`` with
  ``include_thoughts`` (thoughts stream as ``ReasoningDelta``): Gemini 3 models
  (name starts with "gemini-3") take ``thinking_level`` = the effort
  (MINIMAL/LOW/MEDIUM/HIGH); older ones a ``thinking_budget`` in tokens —
  minimal 512, low 1024, medium 8192, high 24576 (each valid for 2.5 Pro,
  Flash and Flash-Lite). ``verbosity`` has no Gemini equivalent and is ignored.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from chatforge.llm.providers._gemini_errors import error_from_api, error_from_malformed, error_from_transport
from chatforge.llm.providers._gemini_messages import (
    GEMINI_ID_KEY,
    THOUGHT_SIGNATURE_KEY,
    to_gemini_prompt,
)
from chatforge.llm.providers.base import (
    ErrorKind,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCall,
    TurnRequest,
    TurnResult,
)
from chatforge.llm.providers.failures import logged_failure
from chatforge.llm.providers.sampling import forced_tool, json_output, stop_sequences
from tools.formats import to_gemini

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_API_VERSION = "v1beta"
_API_VERSIONS = ("v1beta", "v1alpha", "v1")
# The SDK refuses an empty key and would fall back to GOOGLE_API_KEY /
# GEMINI_API_KEY from the environment; an explicit placeholder gets a clear 400.
PLACEHOLDER_API_KEY = "no-key-configured"
THINKING_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
THINKING_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}
SUPPORTED_OPTIONS = frozenset({"temperature", "max_tokens", "reasoning_effort", "top_p", "stop", "seed",
                               "presence_penalty", "frequency_penalty", "response_format", "tool_choice"})
CONTENT_FILTER_REASONS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)


# What a call can raise besides ProviderError: API errors (HTTP status or an
# error event), transport errors, and bodies that are not the promised JSON.
_HANDLED = (
    genai_errors.APIError,
    httpx.HTTPError,
    genai_errors.UnknownApiResponseError,
    pydantic.ValidationError,
    ValueError,
)


def uses_thinking_level(model: str) -> bool:
    """Gemini 3 takes ``thinking_level``; 2.x only ``thinking_budget``."""
    return model.removeprefix("models/").startswith("gemini-3")


class GeminiProvider:
    """``ChatProvider`` for the Gemini API.

    ``base_url`` is the API root (``https://generativelanguage.googleapis.com``);
    a trailing ``/v1beta`` (or ``/v1``, ``/v1alpha``) is taken as the API version.
    ``signature_fallback``: when a replayed function call has no thought
    signature (history from another model, or stored without metadata), send
    Google's ``skip_thought_signature_validator`` stand-in instead of getting a
    400 from Gemini 3. ``None`` means "for Gemini 3 models only".
    """

    name = "gemini"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout_s: float = 600.0,
        idle_timeout_s: float = 60.0,
        signature_fallback: bool | None = None,
    ) -> None:
        root, api_version = _split_version(base_url or DEFAULT_BASE_URL)
        self.base_url = root
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.signature_fallback = signature_fallback
        self._where = "Gemini" if root == DEFAULT_BASE_URL else f"Gemini API at {root}"
        self._local = threading.local()
        self._http = httpx.Client(event_hooks={"response": [self._remember_response]})
        self._client = genai.Client(
            api_key=api_key or PLACEHOLDER_API_KEY,
            vertexai=False,
            http_options=types.HttpOptions(
                base_url=root,
                api_version=api_version,
                timeout=_milliseconds(min(idle_timeout_s, timeout_s)),
                headers={"X-Server-Timeout": str(math.ceil(timeout_s))},
                retry_options=types.HttpRetryOptions(attempts=1),
                httpx_client=self._http,
            ),
        )

    # -- the interface -------------------------------------------------------

    def stream_turn(self, request: TurnRequest) -> Iterator[StreamItem]:
        contents, config = self._prepare(request)
        if not request.stream:
            yield from self._complete(request, contents, config)
            return
        state = _TurnState(where=self._where)
        deadline = time.monotonic() + self.timeout_s
        self._local.response = None
        response: httpx.Response | None = None
        stream = self._client.models.generate_content_stream(
            model=request.model, contents=contents, config=config
        )
        try:
            for chunk in stream:
                if response is None:
                    response = self._take_response()
                yield from state.consume(chunk)
                if time.monotonic() > deadline:
                    raise ProviderError(
                        f"{self._where} did not finish the answer within {self.timeout_s:g} s",
                        retryable=True,
                        kind=ErrorKind.CONNECTION,
                    )
        except _HANDLED as exc:
            raise self._error(exc, request, received_any=state.received_any) from exc
        finally:
            # Runs on the normal end, on errors and on GeneratorExit (the caller
            # cancelled): the HTTP response must not outlive the generator.
            stream.close()
            response = response or self._take_response()
            if response is not None:
                response.close()
        yield state.result()

    def close(self) -> None:
        self._http.close()

    # -- internals -------------------------------------------------------------

    def _complete(
        self, request: TurnRequest, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> Iterator[StreamItem]:
        """``stream=False``: one ``generateContent`` call, bounded by ``timeout_s``."""
        config = config.model_copy(
            update={"http_options": types.HttpOptions(timeout=_milliseconds(self.timeout_s))}
        )
        state = _TurnState(where=self._where)
        try:
            reply = self._client.models.generate_content(
                model=request.model, contents=contents, config=config
            )
            deltas = list(state.consume(reply))
        except _HANDLED as exc:
            raise self._error(exc, request, received_any=False) from exc
        finally:
            self._take_response()  # read in full already; drop the reference
        result = state.result()
        if result.reasoning:
            yield ReasoningDelta(result.reasoning)
        if result.text or not deltas:
            yield TextDelta(result.text)
        yield result

    def _prepare(self, request: TurnRequest) -> tuple[list[types.Content], types.GenerateContentConfig]:
        fallback = self.signature_fallback
        if fallback is None:
            fallback = uses_thinking_level(request.model)
        prompt = to_gemini_prompt(request.messages, signature_fallback=fallback)
        contents = [_sdk_content(content) for content in prompt.contents]
        return contents, _config(request, system_instruction=prompt.system_instruction)

    def _remember_response(self, response: httpx.Response) -> None:
        self._local.response = response

    def _take_response(self) -> httpx.Response | None:
        response = getattr(self._local, "response", None)
        self._local.response = None
        return response

    def _error(self, exc: Exception, request: TurnRequest, *, received_any: bool) -> ProviderError:
        if isinstance(exc, genai_errors.APIError):
            error = error_from_api(exc, where=self._where, model=request.model)
        elif isinstance(exc, httpx.HTTPError):
            error = error_from_transport(
                exc, where=self._where, idle_timeout_s=self.idle_timeout_s, received_any=received_any
            )
        else:
            error = error_from_malformed(exc, where=self._where)
        return logged_failure(error, provider=self.name, model=request.model)


# --------------------------------------------------------------------------
# Request
# --------------------------------------------------------------------------


def _split_version(base_url: str) -> tuple[str, str]:
    root = base_url.rstrip("/")
    for version in _API_VERSIONS:
        if root.endswith("/" + version):
            return root[: -len(version) - 1], version
    return root, DEFAULT_API_VERSION


def _milliseconds(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _config(request: TurnRequest, *, system_instruction: str | None) -> types.GenerateContentConfig:
    options = request.options
    config: dict[str, Any] = {"system_instruction": system_instruction}
    tools = to_gemini(request.tools)
    if tools:
        config["tools"] = [types.Tool.model_validate(tool) for tool in tools]
    if options.get("temperature") is not None:
        config["temperature"] = float(options["temperature"])
    if options.get("max_tokens") is not None:
        config["max_output_tokens"] = int(options["max_tokens"])
    for ours, theirs in (("top_p", "top_p"), ("seed", "seed"), ("presence_penalty", "presence_penalty"),
                         ("frequency_penalty", "frequency_penalty")):
        if options.get(ours) is not None:
            config[theirs] = options[ours]
    if options.get("stop") is not None:
        config["stop_sequences"] = stop_sequences(options["stop"])
    wants_json, schema, _ = json_output(options.get("response_format"))
    if wants_json:
        config["response_mime_type"] = "application/json"
        if schema is not None:
            config["response_json_schema"] = schema
    if tools and options.get("tool_choice") is not None:
        config["tool_config"] = _tool_config(options["tool_choice"])
    effort = options.get("reasoning_effort")
    if effort is not None:
        config["thinking_config"] = thinking_config(request.model, str(effort))
    ignored = sorted(
        key for key, value in options.items() if key not in SUPPORTED_OPTIONS and value is not None
    )
    if ignored:
        logger.debug("Ignoring options the Gemini adapter does not support: %s", ignored)
    return types.GenerateContentConfig(**config)


def _tool_config(choice: Any) -> types.ToolConfig:
    """OpenAI's ``tool_choice`` as Gemini's function-calling mode: required →
    ANY, a named function → ANY limited to it, none → NONE, auto → AUTO."""
    forced = forced_tool(choice)
    if forced:
        calling = types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode.ANY,
                                              allowed_function_names=[forced])
    else:
        mode = {"required": "ANY", "none": "NONE"}.get(choice, "AUTO")
        calling = types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode(mode))
    return types.ToolConfig(function_calling_config=calling)


def thinking_config(model: str, effort: str) -> types.ThinkingConfig:
    """``reasoning_effort`` as Gemini's thinking settings (see the module docstring)."""
    effort = effort.lower()
    if uses_thinking_level(model):
        level = THINKING_LEVELS.get(effort, "HIGH")
        return types.ThinkingConfig(thinking_level=types.ThinkingLevel(level), include_thoughts=True)
    return types.ThinkingConfig(thinking_budget=THINKING_BUDGETS.get(effort, 8192), include_thoughts=True)


def _sdk_content(content: dict[str, Any]) -> types.Content:
    """A wire-shaped content dict as the SDK's type; signatures become bytes."""
    parts: list[types.Part] = []
    for part in content["parts"]:
        if "text" in part:
            parts.append(types.Part(text=part["text"]))
            continue
        if "functionCall" in part:
            call = part["functionCall"]
            parts.append(
                types.Part(
                    function_call=types.FunctionCall(name=call["name"], args=call["args"], id=call.get("id")),
                    thought_signature=_signature_bytes(part.get("thoughtSignature")),
                )
            )
            continue
        response = part["functionResponse"]
        parts.append(
            types.Part(
                function_response=types.FunctionResponse(
                    name=response["name"], response=response["response"], id=response.get("id")
                )
            )
        )
    return types.Content(role=content["role"], parts=parts)


def _signature_bytes(signature: str | None) -> bytes | None:
    """Standard or URL-safe base64, padded or not, as bytes. A signature that
    is not base64 at all cannot be sent through the SDK and is dropped."""
    if not signature:
        return None
    text = signature.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        logger.warning("Dropping a thought signature that is not base64")
        return None


def _signature_text(signature: bytes | None) -> str | None:
    return base64.b64encode(signature).decode("ascii") if signature else None


# --------------------------------------------------------------------------
# Response
# --------------------------------------------------------------------------


@dataclass
class _TurnState:
    """Everything learned from the chunks (or the single response) of one turn."""

    where: str
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    block_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    response_id: str | None = None
    received_any: bool = False

    def consume(self, chunk: types.GenerateContentResponse) -> Iterator[TextDelta | ReasoningDelta]:
        self.received_any = True
        if self.response_id is None and chunk.response_id:
            self.response_id = chunk.response_id
        if chunk.usage_metadata is not None:
            self.usage = usage_dict(chunk.usage_metadata)  # cumulative: the last one wins
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.block_reason = _enum_text(feedback.block_reason)
        for candidate in chunk.candidates or ():
            if candidate.index not in (0, None):
                continue  # we never ask for several candidates
            # Parts first: the finishing chunk usually carries the last ones.
            for part in (candidate.content.parts if candidate.content else None) or ():
                yield from self._consume_part(part)
            if candidate.finish_reason is not None:
                self.finish_reason = _enum_text(candidate.finish_reason)

    def _consume_part(self, part: types.Part) -> Iterator[TextDelta | ReasoningDelta]:
        if part.function_call is not None:
            self.tool_calls.append(self._tool_call(part))
        elif part.text:
            if part.thought:
                self.reasoning_parts.append(part.text)
                yield ReasoningDelta(part.text)
            else:
                self.text_parts.append(part.text)
                yield TextDelta(part.text)
        # A signature on a text or thought part has no place to be stored
        # (only tool calls carry metadata); Gemini only requires the ones on
        # function calls back.

    def _tool_call(self, part: types.Part) -> ToolCall:
        call = part.function_call
        assert call is not None
        name = call.name or ""
        arguments = _json_text(call.args or {})
        metadata: dict[str, Any] = {}
        signature = _signature_text(part.thought_signature)
        if signature:
            metadata[THOUGHT_SIGNATURE_KEY] = signature
        if call.id:
            metadata[GEMINI_ID_KEY] = True
            call_id = call.id
        else:
            call_id = self._synthesised_id(len(self.tool_calls), name, arguments)
        return ToolCall(id=call_id, name=name, arguments=arguments, metadata=metadata)

    def _synthesised_id(self, position: int, name: str, arguments: str) -> str:
        if not self.response_id:
            return f"call_{uuid.uuid4().hex[:24]}"
        seed = f"{self.response_id}\x00{position}\x00{name}\x00{arguments}".encode()
        return f"call_{hashlib.sha256(seed).hexdigest()[:24]}"

    def result(self) -> TurnResult:
        if self.finish_reason is None and self.block_reason is None:
            # The connection ended cleanly, but Gemini's last chunk (the one
            # with finishReason) never came: a proxy cut the stream short.
            raise ProviderError(
                f"{self.where} ended the stream before the model finished",
                retryable=True,
                kind=ErrorKind.PROTOCOL,
            )
        return TurnResult(
            text="".join(self.text_parts),
            tool_calls=list(self.tool_calls),
            finish_reason=self._normalised_finish_reason(),
            usage=self.usage,
            reasoning="".join(self.reasoning_parts),
            response_id=self.response_id,
        )

    def _normalised_finish_reason(self) -> str:
        """Calls are detected by presence: Gemini says STOP when it calls functions."""
        if self.tool_calls:
            return "tool_calls"
        if self.block_reason is not None and self.finish_reason is None:
            logger.info("Gemini blocked the prompt: %s", self.block_reason)
            return "content_filter"
        raw = self.finish_reason or "STOP"
        if raw == "STOP":
            return "stop"
        if raw == "MAX_TOKENS":
            return "length"
        if raw in CONTENT_FILTER_REASONS:
            return "content_filter"
        logger.warning("Gemini finished with %s; treating it as 'stop'", raw)
        return "stop"


def usage_dict(usage: types.GenerateContentResponseUsageMetadata) -> dict[str, int]:
    """``usageMetadata`` in the engine's terms. ``completion_tokens`` includes
    the thinking tokens, as OpenAI counts them (Gemini lists them apart)."""
    prompt = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
    completion = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    result = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": usage.total_token_count or prompt + completion,
    }
    if usage.thoughts_token_count is not None:
        result["reasoning_tokens"] = usage.thoughts_token_count
    if usage.cached_content_token_count is not None:
        result["cached_tokens"] = usage.cached_content_token_count
    return result


def _enum_text(value: Any) -> str:
    return str(getattr(value, "value", value))


def _json_text(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)
