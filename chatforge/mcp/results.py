"""An MCP tool result as the value a ChatForge tool returns.

Tool results go to the model as text (or JSON), are stored and streamed, so:
structured content when the server gave it (exact JSON, which MCP servers
also repeat as text), else the text of the content blocks. Images, audio and
binary resources cannot be read by the model as a tool message: each is
replaced by a short note saying what was left out.
"""

from __future__ import annotations

from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from .errors import tool_reported_error


def tool_output(result: CallToolResult, *, server: str) -> Any:
    """The value of a successful call; ``ToolArgumentError`` for an ``isError`` result."""
    text = "\n".join(_block_text(block) for block in result.content)
    if result.is_error:
        raise tool_reported_error(server, text)
    if result.structured_content is not None:
        return result.structured_content
    return text


def _block_text(block: Any) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} ({block.mime_type}) left out: only text reaches the model]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, BlobResourceContents):
            return f"[binary resource {resource.uri} left out: only text reaches the model]"
        return resource.text
    return f"[{getattr(block, 'type', type(block).__name__)} content left out]"
