"""A user message's images in each provider's wire format: OpenAI-compatible
``image_url`` parts, Responses ``input_image``, Anthropic image sources
(base64 or URL), Gemini ``inlineData``, Ollama's base64 list; and how they
are stored (OpenAI content parts on ``Message.content_json``)."""

from __future__ import annotations

from chatforge.llm.providers._anthropic_messages import to_anthropic
from chatforge.llm.providers._gemini_messages import to_gemini_prompt
from chatforge.llm.providers.base import ChatMessage
from chatforge.llm.providers.images import content_parts, data_url_parts, images_of
from chatforge.llm.providers.ollama_adapter import message_to_ollama
from chatforge.llm.providers.openai_compat import message_to_openai
from chatforge.llm.providers.openai_responses import message_to_items

PNG = "data:image/png;base64,iVBORw0KGgo="
LINK = "https://example.com/cat.jpg"
ASK = ChatMessage(role="user", content="What is this?", images=(PNG, LINK))


def test_stored_as_openai_parts_and_read_back():
    parts = content_parts("What is this?", [PNG, LINK])
    assert parts == [{"type": "text", "text": "What is this?"},
                     {"type": "image_url", "image_url": {"url": PNG}},
                     {"type": "image_url", "image_url": {"url": LINK}}]
    assert images_of(parts) == (PNG, LINK)
    assert content_parts("text only", []) is None and images_of(None) == ()
    assert data_url_parts(PNG) == ("image/png", "iVBORw0KGgo=") and data_url_parts(LINK) is None


def test_openai_compatible():
    assert message_to_openai(ASK) == {"role": "user", "content": content_parts("What is this?", [PNG, LINK])}
    assert message_to_openai(ChatMessage(role="user", content="hi")) == {"role": "user", "content": "hi"}


def test_openai_responses():
    assert message_to_items(ASK) == [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": PNG, "detail": "auto"},
        {"type": "input_image", "image_url": LINK, "detail": "auto"}]}]


def test_anthropic():
    (turn,) = to_anthropic([ASK]).messages
    assert turn == {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": LINK}}]}


def test_gemini():
    (content,) = to_gemini_prompt([ChatMessage(role="user", content="", images=(PNG,))]).contents
    assert content == {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}


def test_ollama():
    assert message_to_ollama(ChatMessage(role="user", content="What is this?", images=(PNG,))) == {
        "role": "user", "content": "What is this?", "images": ["iVBORw0KGgo="]}
