"""Image content parts through ``/v1/chat/completions`` with the official
SDK against the live stack: an image reaches a vision model as an
``image_url`` part and is stored with the message (and sent again as
history); models that cannot take it refuse it up front with a 400 that
says what to do."""

from __future__ import annotations

import openai
import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.conversations.models import Message
from chatforge.llm.models import LanguageModel, Provider
from tests.fakes.openai_server import Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAfbLI3wAAAABJRU5ErkJggg=="


def sdk(stack, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.http_url + "/v1", api_key=token, max_retries=0, timeout=60)


def model_row(fake_llm, name: str, *, vision: bool, kind: str = "openai") -> None:
    provider = Provider.objects.create(name=f"p-{name}", kind=kind, base_url=fake_llm.base_url,
                                       api_key_ciphertext=encrypt("test-key"))
    LanguageModel.objects.create(name=name, provider=provider, supports_vision=vision)


def image_message(url: str = PNG, text: str = "What is in the picture?") -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text},
                                        {"type": "image_url", "image_url": {"url": url}}]}


def test_an_image_reaches_a_vision_model_and_stays_in_the_history(stack, fake_llm, make_user):
    fake_llm.add_script("vision", lambda body: Reply(text="A single pixel."))
    model_row(fake_llm, "vision", vision=True)
    user, token = make_user()
    client = sdk(stack, token)

    first = client.chat.completions.create(model="vision", messages=[image_message()])
    assert first.choices[0].message.content == "A single pixel."
    sent = fake_llm.requests_for("vision")[-1]["messages"][-1]
    assert sent == {"role": "user", "content": [{"type": "text", "text": "What is in the picture?"},
                                                {"type": "image_url", "image_url": {"url": PNG}}]}
    stored = Message.objects.get(conversation__user=user, role="user")
    assert stored.content == "What is in the picture?" and stored.content_json == sent["content"]

    # Continued by conversation_id: the stored image goes with the history.
    client.chat.completions.create(model="vision", messages=[{"role": "user", "content": "Colour?"}],
                                   extra_body={"conversation_id": first.model_extra["conversation_id"]})
    history = fake_llm.requests_for("vision")[-1]["messages"]
    assert history[0]["content"][1] == {"type": "image_url", "image_url": {"url": PNG}}
    assert history[-1] == {"role": "user", "content": "Colour?"}


@pytest.mark.parametrize(("model", "setup", "url", "text"), [
    ("text-only", {"vision": False}, PNG, "not set up to take images"),
    ("ollama-vision", {"vision": True, "kind": "ollama"}, "https://example.com/cat.png", "inline only"),
])
def test_models_that_cannot_take_the_image_refuse_it(stack, fake_llm, make_user, model, setup, url, text):
    if setup is not None:
        model_row(fake_llm, model, **setup)
    user, token = make_user()
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(stack, token).chat.completions.create(model=model, messages=[image_message(url)])
    error = caught.value.body
    assert error["code"] == "images_not_supported" and error["param"] == "messages" and text in error["message"]
    assert not Message.objects.filter(conversation__user=user).exists()


@pytest.mark.parametrize(("content", "text"), [
    ([{"type": "image_url", "image_url": {"url": "data:text/html;base64,PGI+"}}], "an image must be"),
    ([{"type": "image_url", "image_url": "https://example.com/a.png"}], "an image must be"),
    ([{"type": "input_audio", "input_audio": {}}], "'input_audio' is not supported"),
])
def test_malformed_image_parts(stack, make_user, content, text):
    _, token = make_user()
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(stack, token).chat.completions.create(model="demo", messages=[{"role": "user", "content": content}])
    assert text in caught.value.body["message"]
