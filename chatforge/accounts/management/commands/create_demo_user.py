"""Create (or reuse) a demo user and print an API token for it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from chatforge.accounts.tokens import api_token_create


class Command(BaseCommand):
    help = "Create the demo user (if missing) and print a fresh API token for it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo")
        parser.add_argument("--token-only", action="store_true", help="Print only the token.")

    def handle(self, *args, username: str, password: str, token_only: bool, **options) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.save()
        issued = api_token_create(user=user, name="demo")
        if token_only:
            self.stdout.write(issued.plaintext)
            return
        verb = "Created" if created else "Reusing"
        self.stdout.write(f"{verb} user '{username}' (password '{password}' if newly created).")
        self.stdout.write(f"API token: {issued.plaintext}")
