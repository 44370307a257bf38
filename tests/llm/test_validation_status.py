"""A model is validated at 80 % successful tool-calling tests or better."""

import pytest

from chatforge.llm.models import ModelValidation
from chatforge.llm.validation import validation_status

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("successes", "tests", "validated"), [(0, 0, False), (4, 5, True), (3, 4, False), (1, 1, True)])
def test_the_80_percent_rule(successes, tests, validated):
    for i in range(tests):
        ModelValidation.objects.create(model="m", query="q", success=i < successes)
    status = validation_status("m")
    assert (status.tests, status.successes, status.validated) == (tests, successes, validated)
