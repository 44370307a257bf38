from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "chatforge.accounts"
    label = "accounts"
