"""Reading a tool's descriptions out of its handler's docstring.

Writing a tool as a documented function keeps the description the model reads
next to the code it describes, instead of in a separate schema that drifts.
Google style (``Args:``) and Sphinx style (``:param name:``) are understood.
"""

from __future__ import annotations

import inspect
import re

# "Attributes:" documents the fields of a dataclass or TypedDict.
_SECTION_HEADERS = frozenset({"args:", "arguments:", "parameters:", "params:", "attributes:"})
# Any other "Word:" line alone ends the Args section (Returns:, Raises:, ...).
_OTHER_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:$")
# "name: text" or "name (type): text"
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[^:\s]+\s+)?(\w+)\s*:\s*(.*)$")


def summary(docstring: str | None) -> str:
    """The docstring's first paragraph on one line, or ``""``."""
    text = inspect.cleandoc(docstring or "")
    paragraph = text.split("\n\n", 1)[0]
    if paragraph.lstrip().startswith(":") or paragraph.strip().lower() in _SECTION_HEADERS:
        return ""  # the docstring starts with its parameter list
    return " ".join(paragraph.split())


def argument_descriptions(docstring: str | None) -> dict[str, str]:
    """Per-parameter descriptions from an ``Args:`` section or ``:param x:`` lines."""
    lines = inspect.cleandoc(docstring or "").splitlines()
    descriptions = _google_arguments(lines)
    descriptions.update(_sphinx_arguments(lines))
    return descriptions


def _google_arguments(lines: list[str]) -> dict[str, str]:
    """Entries of the ``Args:`` section: a ``name: text`` line plus its more-indented continuation lines."""
    found: dict[str, list[str]] = {}
    in_section = False
    entry_indent: int | None = None
    current: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not in_section:
            in_section = stripped.lower() in _SECTION_HEADERS
            continue
        if not stripped:
            continue
        if indent == 0 and _OTHER_SECTION.match(stripped):
            break  # the next section
        match = _GOOGLE_ARG.match(stripped)
        if match and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = found.setdefault(match.group(1).lstrip("*"), [])
            current.append(match.group(2))
        elif current is not None:
            current.append(stripped)
    return {name: " ".join(" ".join(parts).split()) for name, parts in found.items()}


def _sphinx_arguments(lines: list[str]) -> dict[str, str]:
    """``:param [type] name: text`` entries, with their indented continuation lines."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        match = _SPHINX_ARG.match(stripped)
        if match:
            current = found.setdefault(match.group(1), [])
            current.append(match.group(2))
        elif stripped.startswith(":") or not stripped:
            current = None
        elif current is not None and line.startswith((" ", "\t")):
            current.append(stripped)
    return {name: " ".join(" ".join(parts).split()) for name, parts in found.items()}
