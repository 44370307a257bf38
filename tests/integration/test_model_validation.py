"""POST /api/tools/test runs a tool-enabled chat on the workers and records
the outcome per model; GET /api/models/ shows the validation status."""

from __future__ import annotations

import pytest

from chatforge.llm.models import ModelValidation
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_model_validation_records_outcomes_and_applies_the_80_percent_rule(stack, fake_llm, make_user):
    fake_llm.add_script("val-good", [Reply(tool_calls=[("calculator", {"expression": "6*7"})]), Reply(text="42")])
    fake_llm.add_script("val-lazy", [Reply(text="I think it is 42, no tools needed.")])
    staff, token = make_user()
    staff.is_staff = True
    staff.save()
    api = ApiClient(stack.http_url, token)

    result = api.request("POST", "/api/tools/test", json={"query": "What is 6*7?", "model": "val-good"}).json()
    assert result["success"] is True and result["status"] == "completed" and result["answer"] == "42"
    assert result["tool_calls"] == [{"iteration": 0, "name": "calculator", "arguments": '{"expression": "6*7"}',
                                     "status": "success", "result": '{"expression":"6*7","result":42}',
                                     "execution_time_ms": result["tool_calls"][0]["execution_time_ms"]}]
    assert result["max_iterations_reached"] is False and result["recorded"] is True
    assert result["validation"] == {"model": "val-good", "tests": 1, "successes": 1, "success_rate": 1.0,
                                    "validated": True}

    lazy = api.request("POST", "/api/tools/test", json={"query": "What is 6*7?", "model": "val-lazy"}).json()
    assert lazy["success"] is False and lazy["error"] == "The model did not call any tool."
    for _ in range(4):
        api.request("POST", "/api/tools/test", json={"query": "What is 6*7?", "model": "val-good"})
    api.request("POST", "/api/tools/test", json={"query": "What is 6*7?", "model": "val-lazy"})
    assert ModelValidation.objects.filter(model="val-good").count() == 5

    models = {m["id"]: m for m in api.request("GET", "/api/models/").json()["models"]}
    assert "demo" in models
    bad = api.request("POST", "/api/tools/test", json={"model": "val-good"})
    assert bad.status_code == 400 and "query" in bad.json()["error"]["message"]


def test_tests_by_users_who_are_not_staff_run_but_are_not_recorded(stack, fake_llm, make_user):
    fake_llm.add_script("val-user", [Reply(tool_calls=[("calculator", {"expression": "6*7"})]), Reply(text="42")])
    _, token = make_user()
    api = ApiClient(stack.http_url, token)

    result = api.request("POST", "/api/tools/test", json={"query": "What is 6*7?", "model": "val-user"}).json()
    assert result["success"] is True and result["answer"] == "42"
    assert result["recorded"] is False
    assert result["validation"] == {"model": "val-user", "tests": 0, "successes": 0, "success_rate": 0.0,
                                    "validated": False}
    assert not ModelValidation.objects.filter(model="val-user").exists()
