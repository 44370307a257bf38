"""The ``background-tasks`` model: where a frontend sends the requests it
makes for itself, not for the person (Open WebUI's title, tag and follow-up
generation, its "task model").

Sent to an ordinary model, each such request was a full ChatForge run with
every server tool offered, counted against the person's message rate, in a
conversation of its own beside theirs: a first message cost four runs. Sent
to this alias, it is answered by one model turn with no tools (server's or
client's), in a conversation marked ``source: "task"`` that lists show only
when asked (``?source=task``), without counting against the message rate
(the active-run cap still holds). The model that answers is
``CHATFORGE_OPENAI_BACKGROUND_TASKS_MODEL``, else the default model.
"""

from __future__ import annotations

from django.conf import settings

BACKGROUND_TASKS_MODEL = "background-tasks"


def is_background_task(model: str) -> bool:
    return settings.CHATFORGE_OPENAI_BACKGROUND_TASKS and model == BACKGROUND_TASKS_MODEL


def answering_model(model: str) -> str:
    """The model that answers a request for ``model``: the alias's model
    for background tasks, the model itself otherwise."""
    if not is_background_task(model):
        return model
    return settings.CHATFORGE_OPENAI_BACKGROUND_TASKS_MODEL or settings.CHATFORGE_DEFAULT_MODEL


def listed_model() -> dict | None:
    """The alias's ``/v1/models`` item (None when turned off)."""
    if not settings.CHATFORGE_OPENAI_BACKGROUND_TASKS:
        return None
    return {"id": BACKGROUND_TASKS_MODEL, "object": "model", "created": 0, "owned_by": "chatforge"}
