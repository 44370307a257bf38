from __future__ import annotations

import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from tools.builtin.get_time import GET_TIME, describe_time
from tools.executor import execute_tool
from tests.tools.factories import registry_of


def test_defaults_to_utc() -> None:
    before = int(time.time())
    result = execute_tool(registry_of(GET_TIME), "get_time", None)
    after = int(time.time())

    assert result.success
    value = result.result
    assert set(value) == {"timezone", "iso", "unix", "weekday"}
    assert value["timezone"] == "UTC"
    assert value["iso"].endswith("+00:00")
    assert before <= value["unix"] <= after
    moment = datetime.fromisoformat(value["iso"])
    assert int(moment.timestamp()) == value["unix"]
    assert value["weekday"] == moment.strftime("%A")


def test_named_zone_has_its_offset() -> None:
    result = execute_tool(registry_of(GET_TIME), "get_time", '{"timezone": "Asia/Kolkata"}')

    assert result.result["timezone"] == "Asia/Kolkata"
    assert result.result["iso"].endswith("+05:30")


def test_describe_time_for_a_fixed_moment() -> None:
    moment = datetime(2024, 7, 14, 12, 30, 5, 123456, tzinfo=timezone.utc).astimezone(
        ZoneInfo("Europe/Paris")
    )

    assert describe_time(moment, "Europe/Paris") == {
        "timezone": "Europe/Paris",
        "iso": "2024-07-14T14:30:05+02:00",
        "unix": 1720960205,
        "weekday": "Sunday",
    }


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../etc/passwd", "/etc/localtime"])
def test_unknown_timezone_is_an_argument_error_naming_it(zone: str) -> None:
    result = execute_tool(registry_of(GET_TIME), "get_time", {"timezone": zone})

    assert result.status == "error"
    assert result.retryable_by_model
    assert result.error is not None
    assert result.error.startswith(f"Error executing tool 'get_time': Unknown timezone '{zone}'.")
    assert result.error.endswith("Please check the arguments and try again.")


def test_schema_and_policy() -> None:
    assert GET_TIME.parameters["additionalProperties"] is False
    assert "required" not in GET_TIME.parameters
    assert GET_TIME.policy.timeout_s == 5.0
    assert GET_TIME.policy.side_effects == "read_only"
