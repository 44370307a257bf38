"""/v1 and versions (decision 0037): a request with ``conversation_id``
continues the current branch, and a resent history continues the
conversation whose current branch it is — never another branch."""

from __future__ import annotations

import openai
import pytest

from chatforge.conversations.models import Message
from tests.fakes.openai_server import echo_user
from tests.support.client import ApiClient
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MODEL = "tree-v1-echo"


def sdk(stack, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60)


def sent(fake_llm) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in fake_llm.requests_for(MODEL)[-1]["messages"]]


def test_v1_continues_the_current_branch(stack, fake_llm, make_user):
    fake_llm.add_script(MODEL, echo_user())
    _, token = make_user()
    client, api = sdk(stack, token), ApiClient(stack.http_url, token)
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "noted"},
               {"role": "user", "content": "second"}]
    first = client.chat.completions.create(model=MODEL, messages=history)
    conversation = first.model_extra["conversation_id"]
    stored = list(Message.objects.filter(conversation_id=conversation).order_by("created_at", "id"))
    # The resent history is stored as one branch: each message follows the one before.
    assert [m.parent_id for m in stored] == [None, *[m.pk for m in stored[:-1]]]

    # An edit of "second" over REST: the current branch is now the edit's.
    edit = api.post_message(conversation, "second, edited", model=MODEL, parent_id=str(stored[1].pk))
    wait_for(lambda: Message.objects.filter(run_id=edit["run_id"], role="assistant").exists(), timeout=60,
             what="the edit's answer")

    continued = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "third"}], extra_body={"conversation_id": conversation})
    assert continued.model_extra["conversation_id"] == conversation
    assert sent(fake_llm) == [("user", "first"), ("assistant", "noted"), ("user", "second, edited"),
                              ("assistant", "You said: second, edited"), ("user", "third")]

    # A frontend resending the current branch continues this conversation...
    current = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "noted"},
               {"role": "user", "content": "second, edited"}, {"role": "assistant", "content": "You said: second, edited"},
               {"role": "user", "content": "third"}, {"role": "assistant", "content": "You said: third"},
               {"role": "user", "content": "fourth"}]
    resent = client.chat.completions.create(model=MODEL, messages=current)
    assert resent.model_extra["conversation_id"] == conversation
    # ...and one resending the other branch (the first version's) does not.
    other = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "noted"},
             {"role": "user", "content": "second"}, {"role": "assistant", "content": "You said: second"},
             {"role": "user", "content": "again"}]
    elsewhere = client.chat.completions.create(model=MODEL, messages=other)
    assert elsewhere.model_extra["conversation_id"] != conversation
