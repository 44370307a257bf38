"""Model validation: whether a model uses its tools well, from the tests
recorded for it (``ModelValidation`` rows; running a test is the engine's,
``orchestration/services/model_tests.py``). A model is *validated* once at
least 80 % of its tests succeeded (docs/providers.md).

The validation status is shared: every user's model list shows it. So only
staff tests count toward it (``may_record_validation``); anyone else's test
runs and is reported the same, but changes nothing others see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q

from .models import ModelValidation

VALIDATED_RATE = 0.8


@dataclass(frozen=True)
class ValidationStatus:
    model: str
    tests: int
    successes: int

    @property
    def rate(self) -> float:
        return self.successes / self.tests if self.tests else 0.0

    @property
    def validated(self) -> bool:
        return self.tests > 0 and self.rate >= VALIDATED_RATE

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "tests": self.tests, "successes": self.successes,
                "success_rate": round(self.rate, 3), "validated": self.validated}


def validation_status(model: str) -> ValidationStatus:
    counts = ModelValidation.objects.filter(model=model).aggregate(
        tests=Count("id"), successes=Count("id", filter=Q(success=True))
    )
    return ValidationStatus(model, counts["tests"] or 0, counts["successes"] or 0)


def all_validation_statuses() -> dict[str, ValidationStatus]:
    rows = ModelValidation.objects.values("model").annotate(
        tests=Count("id"), successes=Count("id", filter=Q(success=True))
    )
    return {r["model"]: ValidationStatus(r["model"], r["tests"], r["successes"]) for r in rows}


def may_record_validation(user: AbstractBaseUser) -> bool:
    """Whether ``user``'s tests may change the shared validation status."""
    return bool(user.is_active and getattr(user, "is_staff", False))
