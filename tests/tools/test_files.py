"""Files in the tool framework, without Django: which arguments are file ids,
the executor's check of them before the handler runs, the built-in
``list_files`` and ``read_file`` over a port, and the line that names a
call's files for the model.

The port here is a small in-memory ``FileAccess`` (the engine's, over real
rows and storage, is tested in tests/engine/test_tool_files.py)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pytest

from tools.base import Tool, ToolContext
from tools.builtin.files import LIST_FILES, READ_FILE
from tools.errors import ToolArgumentError, TransientToolError
from tools.executor import configure_output_limit, execute_tool, output_limit
from tools.files import (
    FILE_ID,
    DEFAULT_PAGE_CHARS,
    FileInfo,
    FileNotInConversation,
    TextPage,
    declares_file_ids,
    file_id_arguments,
    returned_files_line,
)
from tools.formats import gemini_schema, to_anthropic, to_gemini, to_openai

from .factories import registry_of

DOC_ID = "0b6f5f4e-8f0e-4d53-9a43-7f1d3c2b1a00"
IMAGE_ID = "5a1c0d2e-3f4b-4c6d-8e9f-0a1b2c3d4e5f"


@dataclass
class InMemoryFiles:
    """A conversation's files held in memory: what ``FileAccess`` promises."""

    infos: dict[str, FileInfo] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def list(self) -> list[FileInfo]:
        return list(self.infos.values())

    def info(self, file_id: str) -> FileInfo | None:
        self.asked.append(file_id)
        return self.infos.get(file_id)

    def read_text(self, file_id: str, *, offset: int = 0, limit: int = DEFAULT_PAGE_CHARS) -> TextPage:
        info = self.infos.get(file_id)
        if info is None:
            raise FileNotInConversation(file_id)
        if info.kind == "image":
            raise ToolArgumentError(f"'{info.name}' is an image: it has no text to read")
        if info.text_status == "pending":
            raise TransientToolError(f"the text of '{info.name}' is still being read")
        text = self.texts[file_id]
        page = text[offset:offset + limit]
        end = offset + len(page)
        return TextPage(page, offset, end if end < len(text) else None, len(text), name=info.name)

    def open_bytes(self, file_id: str) -> BinaryIO:
        return io.BytesIO(self.texts[file_id].encode())

    def save(self, name: str, data: bytes | BinaryIO, *, content_type: str | None = None) -> FileInfo:
        raise NotImplementedError


def _files() -> InMemoryFiles:
    files = InMemoryFiles()
    files.infos[DOC_ID] = FileInfo(DOC_ID, "report.txt", "text/plain", "document", 26, "ready")
    files.texts[DOC_ID] = "abcdefghijklmnopqrstuvwxyz"
    files.infos[IMAGE_ID] = FileInfo(IMAGE_ID, "pixel.png", "image/png", "image", 68, "none")
    return files


# --- which arguments are file ids ------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "main": FILE_ID,
        "others": {"type": "array", "items": FILE_ID},
        "label": {"type": "string"},
    },
    "additionalProperties": False,
}


def test_file_id_arguments_are_found_at_the_top_level_and_in_arrays() -> None:
    found = list(file_id_arguments(SCHEMA, {"main": "a", "others": ["b", "c"], "label": "not a file"}))

    assert found == [("$.main", "a"), ("$.others[0]", "b"), ("$.others[1]", "c")]
    assert declares_file_ids(SCHEMA)
    assert not declares_file_ids({"type": "object", "properties": {"label": {"type": "string"}}})


def _handler_calls() -> tuple[Tool, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        calls.append(arguments)
        return "ran"

    return Tool(name="uses_files", description="Takes file ids.", parameters=SCHEMA, handler=handler), calls


def test_ids_of_the_conversations_files_reach_the_handler() -> None:
    tool, calls = _handler_calls()
    files = _files()

    result = execute_tool(registry_of(tool), "uses_files", {"main": DOC_ID, "others": [IMAGE_ID]},
                          context=ToolContext(files=files))

    assert result.success and result.result == "ran"
    assert calls == [{"main": DOC_ID, "others": [IMAGE_ID]}]
    assert files.asked == [DOC_ID, IMAGE_ID]


def test_an_id_of_no_file_of_the_conversation_is_the_models_to_fix_and_never_reaches_the_handler() -> None:
    tool, calls = _handler_calls()

    result = execute_tool(registry_of(tool), "uses_files", {"main": DOC_ID, "others": [IMAGE_ID, "nope"]},
                          context=ToolContext(files=_files()))

    assert calls == []
    assert result.status == "error" and result.retryable_by_model and result.error_kind == "validation"
    assert result.error == (
        "Error: Invalid arguments for tool 'uses_files': $.others[1]: No file with id 'nope' in this "
        "conversation; list_files shows the files there. Please check the arguments and try again."
    )


def test_file_ids_outside_a_conversation_fail_before_the_handler() -> None:
    tool, calls = _handler_calls()

    result = execute_tool(registry_of(tool), "uses_files", {"main": DOC_ID}, context=ToolContext())

    assert calls == []
    assert result.status == "error" and not result.retryable_by_model
    assert "works on the files of a conversation" in (result.error or "")


def test_a_tool_without_file_arguments_never_asks_the_port() -> None:
    files = _files()
    echo = Tool(name="plain", description="No files.", parameters={"type": "object"},
                handler=lambda arguments, context: "ok")

    assert execute_tool(registry_of(echo), "plain", {"x": DOC_ID}, context=ToolContext(files=files)).success
    assert files.asked == []


# --- provider formats ------------------------------------------------------------


def test_the_file_id_format_reaches_gemini_as_a_description_and_others_as_written() -> None:
    parameters = gemini_schema(READ_FILE.parameters)

    assert "format" not in parameters["properties"]["file_id"]
    assert parameters["properties"]["file_id"]["description"].endswith("Format: file-id.")
    assert to_gemini([READ_FILE])[0]["functionDeclarations"][0]["parameters"] == parameters
    assert to_openai([READ_FILE])[0]["function"]["parameters"]["properties"]["file_id"]["format"] == "file-id"
    assert to_anthropic([READ_FILE])[0]["input_schema"]["properties"]["file_id"]["format"] == "file-id"


# --- the built-ins ---------------------------------------------------------------


def test_list_files_gives_ids_types_sizes_and_whether_text_is_readable() -> None:
    result = execute_tool(registry_of(LIST_FILES), "list_files", {}, context=ToolContext(files=_files()))

    assert result.success
    assert result.result == {"count": 2, "files": [
        {"id": DOC_ID, "name": "report.txt", "type": "text/plain", "kind": "document", "size": 26,
         "text": "readable"},
        {"id": IMAGE_ID, "name": "pixel.png", "type": "image/png", "kind": "image", "size": 68,
         "text": "no text (an image)"},
    ]}


def test_read_file_pages_through_a_document() -> None:
    registry, context = registry_of(READ_FILE), ToolContext(files=_files())

    first = execute_tool(registry, "read_file", {"file_id": DOC_ID, "max_chars": 10}, context=context)
    second = execute_tool(registry, "read_file", {"file_id": DOC_ID, "offset": 20, "max_chars": 10},
                          context=context)

    assert first.result == (
        f"[report.txt: characters 0-10 of 26; the next page starts at offset 10 "
        f"(read_file with file_id=\"{DOC_ID}\", offset=10)]\nabcdefghij")
    assert second.result == "[report.txt: characters 20-26 of 26; this is the end of the text]\nuvwxyz"


def test_a_page_fits_in_a_lower_output_limit() -> None:
    before = output_limit()
    configure_output_limit(610)
    try:
        result = execute_tool(registry_of(READ_FILE), "read_file", {"file_id": DOC_ID},
                              context=ToolContext(files=_files()))
    finally:
        configure_output_limit(before)

    assert result.result.startswith("[report.txt: characters 0-10 of 26; the next page starts at offset 10 ")
    assert result.output_text() == result.result  # not cut by the limit's marker


def test_read_file_of_an_image_says_it_has_no_text() -> None:
    result = execute_tool(registry_of(READ_FILE), "read_file", {"file_id": IMAGE_ID},
                          context=ToolContext(files=_files()))

    assert result.status == "error" and result.retryable_by_model
    assert "'pixel.png' is an image" in (result.error or "")


@pytest.mark.parametrize("tool", [LIST_FILES, READ_FILE], ids=lambda tool: tool.name)
def test_the_built_ins_say_so_outside_a_conversation(tool: Tool) -> None:
    arguments = {"file_id": DOC_ID} if tool is READ_FILE else {}

    result = execute_tool(registry_of(tool), tool.name, arguments, context=ToolContext())

    assert result.status == "error"
    assert "works on the files of a conversation" in (result.error or "")


def test_the_built_ins_run_on_the_io_pool_and_only_read() -> None:
    for tool in (LIST_FILES, READ_FILE):
        assert tool.policy.pool == "io" and tool.policy.side_effects == "read_only"


# --- files a call returned -------------------------------------------------------


def test_the_line_after_the_output_names_each_file_and_its_id() -> None:
    line = returned_files_line([FileInfo(DOC_ID, "report.csv", "text/csv", "document", 12, "pending")])

    assert line == (f"\n[Files saved to the conversation by this call: \"report.csv\" (id {DOC_ID}, text/csv, "
                    "12 bytes)]")
