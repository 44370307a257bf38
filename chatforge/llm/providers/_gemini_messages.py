"""Neutral ``ChatMessage``s in Gemini's ``contents`` wire shape (docs/providers.md, "Vendor notes").

Pure functions over plain dicts (camelCase, exactly as sent), so the mapping
can be tested without HTTP; the adapter turns them into SDK types.

* system messages → one ``systemInstruction`` text (joined; Gemini has one).
* user → ``{"role": "user", "parts": [{"text": …}]}``.
* assistant → ``{"role": "model", "parts": [text?, functionCall…]}``: the text
  the model streamed before its calls stays in the same content, as Gemini
  returned it. ``args`` is an object; a call's ``thoughtSignature``
  (``ToolCall.metadata["thought_signature"]``) goes back on its own part.
* consecutive tool messages → one ``{"role": "user", "parts":
  [{"functionResponse": {"name", "response"}}…]}``: a JSON-object output is
  the ``response`` itself, any other output is ``{"result": text}``, and an
  error (the executor's ``Error…`` texts) is ``{"error": text}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from chatforge.llm.providers.base import ChatMessage, ToolCall
from chatforge.llm.providers.images import data_url_parts

logger = logging.getLogger(__name__)

# ``ToolCall.metadata`` keys this adapter writes and reads back.
THOUGHT_SIGNATURE_KEY = "thought_signature"
# Set when the call id came from Gemini (``functionCall.id``); ids we made up
# are never sent back, Gemini then pairs calls and responses by name and order.
GEMINI_ID_KEY = "gemini_call_id"
# Google's documented stand-in for a signature that was not kept (history
# from another model, or stored rounds without metadata): Gemini 3 then skips
# validation instead of answering 400. It is valid URL-safe base64, so it
# survives the SDK's bytes round trip unchanged.
SKIP_SIGNATURE_SENTINEL = "skip_thought_signature_validator"
# How the tool executor words failures (tools/messages.py, rounds.py).
_ERROR_PREFIXES = ("Error:", "Error executing tool ")


@dataclass(frozen=True)
class GeminiPrompt:
    system_instruction: str | None
    contents: list[dict[str, Any]]


def to_gemini_prompt(messages: Sequence[ChatMessage], *, signature_fallback: bool = False) -> GeminiPrompt:
    """The whole conversation. ``signature_fallback``: a model content whose
    calls carry no signature gets the skip sentinel on its first call."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    calls_by_id: dict[str, ToolCall] = {}
    pending_results: list[dict[str, Any]] = []

    def flush_results() -> None:
        if pending_results:
            contents.append({"role": "user", "parts": list(pending_results)})
            pending_results.clear()

    for message in messages:
        if message.role != "tool":
            flush_results()
        match message.role:
            case "system":
                if message.content:
                    system.append(message.content)
            case "user":
                parts = ([{"text": message.content}] if message.content else []) + [
                    _image_part(url) for url in message.images]
                if parts:
                    contents.append({"role": "user", "parts": parts})
                else:
                    logger.debug("Leaving out an empty user message: Gemini refuses empty text parts")
            case "assistant":
                content = _model_content(message, signature_fallback=signature_fallback)
                if content is not None:
                    contents.append(content)
                calls_by_id.update((call.id, call) for call in message.tool_calls)
            case "tool":
                pending_results.append(_function_response_part(message, calls_by_id))
            case _:
                assert_never(message.role)
    flush_results()
    return GeminiPrompt(system_instruction="\n\n".join(system) or None, contents=contents)


def _model_content(message: ChatMessage, *, signature_fallback: bool) -> dict[str, Any] | None:
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"text": message.content})
    calls = [_function_call_part(call) for call in message.tool_calls]
    if calls and signature_fallback and not any("thoughtSignature" in part for part in calls):
        calls[0]["thoughtSignature"] = SKIP_SIGNATURE_SENTINEL
    parts.extend(calls)
    if not parts:
        return None  # an empty model turn is a 400; it carried nothing anyway
    return {"role": "model", "parts": parts}


def _image_part(url: str) -> dict[str, Any]:
    """Gemini takes images inline; a URL is passed as ``fileData`` (Gemini
    fetches only some kinds: /v1 refuses http(s) images for Gemini models)."""
    data = data_url_parts(url)
    if data is not None:
        return {"inlineData": {"mimeType": data[0], "data": data[1]}}
    return {"fileData": {"fileUri": url}}


def _function_call_part(call: ToolCall) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": call.name, "args": arguments_object(call.arguments)}
    if call.metadata.get(GEMINI_ID_KEY):
        function_call["id"] = call.id
    part: dict[str, Any] = {"functionCall": function_call}
    signature = call.metadata.get(THOUGHT_SIGNATURE_KEY)
    if isinstance(signature, str) and signature:
        part["thoughtSignature"] = signature
    return part


def arguments_object(arguments: str) -> dict[str, Any]:
    """Gemini's ``args`` must be an object. Gemini itself only ever sends
    objects, but history may come from another model: invalid JSON is kept
    for the model to see (the tool result already told it what was wrong)."""
    if not arguments or not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"invalid_json": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _function_response_part(message: ChatMessage, calls: dict[str, ToolCall]) -> dict[str, Any]:
    call = calls.get(message.tool_call_id or "")
    name = message.name or (call.name if call is not None else "")
    response: dict[str, Any] = {"name": name, "response": response_object(message.content or "")}
    if call is not None and call.metadata.get(GEMINI_ID_KEY):
        response["id"] = call.id  # Gemini's own id, echoed
    return {"functionResponse": response}


def response_object(output: str) -> dict[str, Any]:
    """A tool's text output as a ``functionResponse.response`` object."""
    if output.startswith(_ERROR_PREFIXES):
        return {"error": output}
    try:
        value = json.loads(output)
    except ValueError:
        return {"result": output}
    return value if isinstance(value, dict) else {"result": output}
