from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "chatforge.conversations"
    label = "conversations"
    verbose_name = "Conversations and runs"
