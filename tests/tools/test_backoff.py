from __future__ import annotations

import pytest

from tools.backoff import backoff_ceiling, backoff_delay
from tools.base import ToolPolicy

POLICY = ToolPolicy(backoff_initial_s=0.5, backoff_max_s=3.0)


@pytest.mark.parametrize(
    ("failed_attempt", "ceiling"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (5, 3.0), (10_000, 3.0)]
)
def test_ceiling_doubles_up_to_the_cap(failed_attempt: int, ceiling: float) -> None:
    assert backoff_ceiling(POLICY, failed_attempt) == ceiling


def test_delay_is_full_jitter_below_the_ceiling() -> None:
    assert backoff_delay(POLICY, 3, rand=lambda: 0.0) == 0.0
    assert backoff_delay(POLICY, 3, rand=lambda: 0.5) == 1.0
    for _ in range(200):
        assert 0.0 <= backoff_delay(POLICY, 3) <= 2.0
