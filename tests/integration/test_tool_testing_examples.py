"""Every example query on the tool testing page is one the built-in demo
model answers with tools, on the real workers — so a new user trying the
page without a configured model sees tools work, and trying an example
records nothing toward validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatforge.llm.models import ModelValidation
from tests.support.client import ApiClient

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TEMPLATE = Path(__file__).resolve().parents[2] / "chatforge/web/templates/web/tool_testing.html"


def example_queries() -> list[str]:
    return re.findall(r'class="example" data-query="([^"]+)"', TEMPLATE.read_text())


@pytest.mark.parametrize("query", example_queries())
def test_the_demo_model_answers_each_example_with_tools(stack, make_user, query):
    _, token = make_user()
    answer = ApiClient(stack.http_url, token).request(
        "POST", "/api/tools/test", json={"query": query, "model": "demo"}).json()
    assert answer["success"] and answer["tool_calls"], answer
    assert answer["recorded"] is False and not ModelValidation.objects.exists()


def test_there_are_examples():
    assert len(example_queries()) >= 4
