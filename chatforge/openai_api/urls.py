"""Routes of the OpenAI-compatible API.

Declared without a trailing slash, as OpenAI's are, and answered with one
too: a client configured with a base URL ending in ``/`` may send either,
and a redirect would lose a POST's body. ``reverse()`` gives the bare form.
"""

from django.urls import re_path

from . import views

urlpatterns = [
    re_path(r"^v1/chat/completions/?$", views.chat_completions, name="openai-chat-completions"),
    re_path(r"^v1/models/?$", views.models_list, name="openai-models"),
    # Model ids may hold slashes ("openai/gpt-4o"); a trailing one is never part of the id.
    re_path(r"^v1/models/(?P<model>.+?)/?$", views.model_detail, name="openai-model"),
]
