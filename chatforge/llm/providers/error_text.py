"""Joining a provider's own error text and our advice into one readable message.

Providers end their messages in different ways: Gemini's "API key not valid.
Please pass a valid API key." ends with a period, Anthropic's "invalid
x-api-key" does not. Adding ". " blindly before the advice printed "key.. Check
GEMINI_API_KEY"; every adapter joins through ``with_hint`` instead.
"""

from __future__ import annotations

_SENTENCE_ENDS = (".", "!", "?", "…")


def with_hint(message: str, hint: str) -> str:
    """``message`` ended as a sentence (a period only if it has no ending of its own), then ``hint``."""
    text = message.rstrip()
    if not text.endswith(_SENTENCE_ENDS):
        text += "."
    return f"{text} {hint}"
