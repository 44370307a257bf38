from django.urls import path

from . import views

urlpatterns = [
    path("v1/chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("v1/models", views.models_list, name="openai-models"),
    path("v1/models/<path:model>", views.model_detail, name="openai-model"),
]
