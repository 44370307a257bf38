"""Whether a model can be given images, asked the same way by every face
that takes them (/v1 content parts, attachments on the REST API).

A model configured in the admin takes images when its "supports vision"
flag is on; a model reached by ``<provider>/<name>`` or the default
endpoint is trusted (its provider answers for itself). Ollama and Gemini
take images inline only, so an http(s) URL for them is refused rather than
dropped. The demo model takes them and says what it was given (it sees
nothing in them), so that attachments can be tried with no provider set up.
"""

from __future__ import annotations

from collections.abc import Iterable

from chatforge.llm.models import ProviderKind
from chatforge.llm.providers.images import data_url_parts
from chatforge.llm.resolution import DEMO_MODEL
from chatforge.llm.routing import resolve_model, route_rows

# Provider kinds that take images as base64 only (no URLs).
INLINE_IMAGES_ONLY = frozenset({ProviderKind.OLLAMA, ProviderKind.GEMINI})


def image_refusal(model: str, *, urls: Iterable[str] = ()) -> str | None:
    """Why ``model`` cannot be given these images (a sentence for the
    person sending them), or None when it can. ``urls``: the images as
    URLs, when some may be links rather than inline data."""
    if model == DEMO_MODEL:
        return None
    rows = route_rows(model)
    route = resolve_model(model, rows=rows)
    if rows.model_row is not None and not route.capabilities.vision:
        return (f"The model '{model}' is not set up to take images (its 'supports vision' setting in the admin "
                "is off): send text only, or choose a model that takes images.")
    if route.kind in INLINE_IMAGES_ONLY and any(data_url_parts(url) is None for url in urls):
        return (f"The model '{model}' takes images inline only: send each image as a base64 data URL "
                "(data:image/png;base64,...) instead of a link.")
    return None
