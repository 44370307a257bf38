"""Assemble streamed OpenAI-style tool-call fragments into whole ``ToolCall``s.

A streamed call arrives as a head fragment (index, id, name, empty arguments)
followed by argument pieces split anywhere. Real servers bend that shape:
Ollama's ``/v1`` endpoint sends ``index: 0`` for every call of a parallel
batch and tells them apart only by ``id``; old builds leave ``index`` out;
some repeat ``id``/``name`` on every fragment. The official SDK's accumulator
concatenates every string, so it would double repeated names and merge
Ollama's calls. This module applies its own rules instead (docs/providers.md,
"Vendor notes").

It is pure Python on purpose: fragments may be the openai SDK's
``ChoiceDeltaToolCall`` objects or plain dicts (from a hand-rolled SSE parser
or a test), so fields are read through :func:`_field`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chatforge.llm.providers.base import ToolCall

logger = logging.getLogger(__name__)

EMPTY_ARGUMENTS = "{}"


def field_of(obj: Any, name: str) -> Any:
    """Read ``name`` from a mapping or an attribute object; ``None`` if absent."""
    if type(obj) is dict:  # streamed chunks are plain JSON: skip the ABC check (~1 µs a field)
        return obj.get(name)
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _text(value: Any) -> str:
    """Fragments carry strings or nulls; anything else is a server bug we
    tolerate by stringifying rather than failing the whole turn."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


@dataclass
class _Slot:
    """One call being assembled. ``index`` is the server's index, which is not
    unique when a server reuses index 0 for a parallel batch."""

    index: int
    id: str = ""
    name: str = ""
    argument_parts: list[str] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.id and not self.name and not any(self.argument_parts)


class ToolCallAccumulator:
    """Feed it every ``delta.tool_calls`` entry in stream order with
    :meth:`add`, then read the finished calls with :meth:`tool_calls`.

    Calls come out in the order they started, which is the order the model
    asked for them and the order results are sent back in.
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        # The server's index -> the slot currently receiving fragments for it.
        self._open_by_index: dict[int, _Slot] = {}
        self._last: _Slot | None = None

    def add(self, fragment: Any) -> None:
        """Merge one fragment (a ``ChoiceDeltaToolCall`` or an equivalent dict)."""
        call_id = _text(field_of(fragment, "id"))
        function = field_of(fragment, "function")
        name = _text(field_of(function, "name"))
        arguments = _text(field_of(function, "arguments"))

        slot = self._slot_for(self._index_of(fragment), call_id)
        if call_id and not slot.id:
            slot.id = call_id
        if name and not slot.name:
            slot.name = name
        elif name and name != slot.name:
            # Some servers stream the name in pieces; nobody we know does, and
            # concatenating would corrupt the common "repeat the name" case.
            logger.debug("Ignoring a second, different name for tool call slot %s", slot.index)
        if arguments:
            slot.argument_parts.append(arguments)
        self._last = slot

    def add_all(self, fragments: Iterable[Any] | None) -> None:
        """Merge every fragment of one delta; ``None`` (no tool calls) is fine."""
        for fragment in fragments or ():
            self.add(fragment)

    def has_calls(self) -> bool:
        return any(not slot.is_empty() for slot in self._slots)

    def tool_calls(self) -> list[ToolCall]:
        """The assembled calls. Empty arguments become ``"{}"`` (a call with no
        parameters); a missing id is synthesised because a tool result must
        name the call it answers."""
        calls: list[ToolCall] = []
        for slot in self._slots:
            if slot.is_empty():
                continue
            call_id = slot.id or self._synthesised_id(slot)
            arguments = "".join(slot.argument_parts) or EMPTY_ARGUMENTS
            calls.append(ToolCall(id=call_id, name=slot.name, arguments=arguments))
        return calls

    def _index_of(self, fragment: Any) -> int:
        """Old servers omit ``index``: such a fragment continues the call that
        was last written to, or starts the first one."""
        index = field_of(fragment, "index")
        if isinstance(index, int):
            return index
        return self._last.index if self._last is not None else 0

    def _slot_for(self, index: int, call_id: str) -> _Slot:
        slot = self._open_by_index.get(index)
        starts_another_call = slot is not None and bool(call_id) and bool(slot.id) and call_id != slot.id
        if slot is None or starts_another_call:
            slot = _Slot(index=index)
            self._slots.append(slot)
            self._open_by_index[index] = slot
        return slot

    @staticmethod
    def _synthesised_id(slot: _Slot) -> str:
        logger.warning(
            "Tool call %r at index %s arrived without an id; synthesising one", slot.name, slot.index
        )
        return f"call_{uuid.uuid4().hex[:24]}"
