"""Reading the admin's answers in tests: a form's errors by field, and a
page's text as a person reads it."""

from __future__ import annotations

import html


def field_errors(response) -> dict[str, list[str]]:
    form = response.context["adminform"].form
    return {name: list(errors) for name, errors in form.errors.items()}


def page_text(response) -> str:
    return html.unescape(response.content.decode())
