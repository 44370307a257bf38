"""The ``get_time`` tool: the current time, which the model cannot know on its own."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.base import Tool, ToolContext, ToolPolicy
from tools.errors import ToolArgumentError

DEFAULT_TIMEZONE = "UTC"
# Fixed English names: strftime("%A") would follow the server's locale.
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def get_time(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """The current time in ``arguments["timezone"]`` (an IANA name, default UTC)."""
    zone = _zone(arguments.get("timezone", DEFAULT_TIMEZONE))
    return describe_time(datetime.now(zone), zone.key)


def describe_time(moment: datetime, timezone: str) -> dict[str, Any]:
    """What the model gets for an aware ``moment``; separate so tests can fix the clock."""
    return {
        "timezone": timezone,
        "iso": moment.isoformat(timespec="seconds"),
        "unix": int(moment.timestamp()),
        "weekday": WEEKDAYS[moment.weekday()],
    }


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        # ValueError: not even a valid key (empty, absolute path, "..").
        raise ToolArgumentError(
            f"Unknown timezone '{name}'. Use an IANA timezone name such as "
            "'UTC', 'Europe/Paris' or 'America/New_York'"
        ) from None


GET_TIME = Tool(
    name="get_time",
    description=(
        "Get the current date and time. Returns the ISO-8601 time with UTC offset, "
        "the Unix timestamp and the weekday for the requested timezone."
    ),
    parameters={
        "type": "object",
        "properties": {
            "timezone": {
                "type": "string",
                "description": "IANA timezone name, e.g. 'Europe/Paris'. Defaults to UTC.",
                "default": DEFAULT_TIMEZONE,
            }
        },
        "additionalProperties": False,
    },
    handler=get_time,
    policy=ToolPolicy(timeout_s=5.0, side_effects="read_only"),
)
