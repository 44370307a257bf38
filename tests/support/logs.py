"""Reading the processes' logs in tests, whatever their format: ChatForge's
JSON lines (distributed mode), its text lines (embedded mode), and
uvicorn's own lines."""

from __future__ import annotations

import json
import re

# Text: "… [error    ] …" (structlog's console renderer); uvicorn: "ERROR:    …";
# the plain format of other libraries: " ERROR ".
_TEXT_ERROR = re.compile(r"\[(?:error|critical)\s*\]|^ERROR:|\sERROR\s", re.M)


def error_lines(logged: str) -> list[str]:
    """The lines that report an error or a traceback."""
    found = []
    for line in logged.splitlines():
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                record = {}
            if record.get("level") in ("error", "critical") or "exception" in record:
                found.append(line)
                continue
        if _TEXT_ERROR.search(line) or "Traceback" in line:
            found.append(line)
    return found


def assert_no_error_logged(logged: str) -> None:
    errors = error_lines(logged)
    assert not errors, "\n".join(errors[-20:])
