"""The REST API's JSON parser: DRF's, with our checks (``json_input``)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .json_input import InvalidJSON, parse_json

# The same code /v1 answers for a body it cannot read, so both APIs name it alike.
INVALID_JSON = "invalid_json"


class CheckedJSONParser(JSONParser):
    """Refuses deep nesting, NUL characters and lone surrogates with a 400
    ``invalid_json`` that says where; DRF's parser let them through to a 500."""

    def parse(self, stream, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        # DRF refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE (413) before this.
        raw = stream.read() if stream is not None else b""
        try:
            return parse_json(raw)
        except InvalidJSON as exc:
            raise ParseError(str(exc), code=INVALID_JSON) from None
