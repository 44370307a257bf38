"""``create_demo_user`` (what ``make run`` calls on every start): one live
demo token at a time — each call issues a new one and revokes the earlier."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from chatforge.accounts.models import ApiToken
from chatforge.accounts.tokens import user_for_token

pytestmark = pytest.mark.django_db


def issue() -> str:
    out = StringIO()
    call_command("create_demo_user", "--token-only", stdout=out)
    return out.getvalue().strip()


def test_each_start_leaves_one_live_demo_token():
    first = issue()
    second = issue()
    assert first != second
    assert user_for_token(first) is None and user_for_token(second).username == "demo"
    assert ApiToken.objects.filter(user__username="demo", revoked_at__isnull=True).count() == 1


def test_tokens_of_other_names_are_left_alone():
    issue()
    from django.contrib.auth import get_user_model

    from chatforge.accounts.tokens import api_token_create

    own = api_token_create(user=get_user_model().objects.get(username="demo"), name="my script")
    issue()
    assert user_for_token(own.plaintext) is not None


def test_the_instructions_say_the_earlier_token_was_revoked_and_how_to_chat_without_the_venv():
    issue()
    out = StringIO()
    call_command("create_demo_user", "--instructions", stdout=out)
    text = out.getvalue()
    assert "(the earlier demo token is revoked)" in text and 'make chat MESSAGE="' in text
