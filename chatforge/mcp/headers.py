"""Filling ``${NAME}`` placeholders in an MCP server's headers.

This is the HTTP tools' one mechanism (``tools.net.http_tools``), not a second
one: ``${NAME}`` becomes the calling user's secret ``name`` (lower case), else
the environment variable ``NAME`` if it starts with ``TOOL_``
(``chatforge.catalog.definitions.env_lookup``). Every value filled in is
recorded on the ``ToolContext``, so the executor scrubs it from the tool's
result and error, and discovery from the error it stores.

Tool calls need every header: a missing credential is an error that tells the
user which secret to add. Discovery is not done for any one user, so it sends
only the headers it can fill from the environment and leaves the others out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from chatforge.catalog.definitions import env_lookup
from tools.base import ToolContext
from tools.errors import ToolError

# The HTTP tools' substitution, reused as it is: the same placeholder syntax,
# lookup order, header checks and error texts for both kinds of tool.
from tools.net.http_tools import _substitute as substitute  # noqa: PLC2701

logger = logging.getLogger(__name__)


def call_headers(headers: Mapping[str, str], context: ToolContext) -> dict[str, str]:
    """Every header with its placeholders filled for the calling user.

    Raises ``ToolError`` naming the secret to add when a placeholder has no value.
    """
    return {name: substitute(value, context, env_lookup, in_url=False) for name, value in headers.items()}


def discovery_headers(headers: Mapping[str, str], context: ToolContext) -> tuple[dict[str, str], list[str]]:
    """The headers that can be filled without a user, and the names of those left out."""
    filled: dict[str, str] = {}
    left_out: list[str] = []
    for name, value in headers.items():
        try:
            filled[name] = substitute(value, context, env_lookup, in_url=False)
        except ToolError:
            left_out.append(name)
    if left_out:
        logger.info("MCP discovery sends no %s header(s): their placeholders need a user", ", ".join(left_out))
    return filled, left_out
