from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "chatforge.accounts"
    label = "accounts"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from .auth_failures import count_failed_sign_in

        user_login_failed.connect(count_failed_sign_in, dispatch_uid="chatforge-count-failed-sign-in")
