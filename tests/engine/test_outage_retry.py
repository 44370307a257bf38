"""Recording a finished model turn is tried again through a short database
outage (orchestration/services/outage_retry.py) instead of handing the turn
back, which would call the model and stream the answer a second time."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, OperationalError

from orchestration.services.outage_retry import retry_through_outage


class _Write:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "recorded"


def _no_pool() -> OperationalError:
    return OperationalError("couldn't get a connection after 10.00 sec")


def test_an_outage_is_waited_out(caplog):
    write = _Write([_no_pool(), _no_pool()])
    assert retry_through_outage(write, what="turn", first_pause_s=0.01) == "recorded"
    assert write.calls == 3
    assert "trying again" in caplog.text


def test_an_outage_longer_than_the_attempts_still_fails_the_step():
    write = _Write([_no_pool() for _ in range(5)])
    with pytest.raises(OperationalError):
        retry_through_outage(write, what="turn", attempts=3, first_pause_s=0.01)
    assert write.calls == 3


def test_an_error_the_write_causes_is_not_retried():
    write = _Write([IntegrityError("duplicate key value violates unique constraint")])
    with pytest.raises(IntegrityError):
        retry_through_outage(write, what="turn", first_pause_s=0.01)
    assert write.calls == 1
