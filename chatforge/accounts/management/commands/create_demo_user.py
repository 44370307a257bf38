"""Create (or reuse) a demo user and print an API token for it.

Tokens are stored hashed, so the plaintext of an earlier one cannot be shown
again: each call issues a new "demo" token and revokes the user's earlier
"demo" tokens, so repeated ``make run`` leaves one live token, not one per
start."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from chatforge.accounts.models import ApiToken
from chatforge.accounts.tokens import api_token_create, api_tokens_revoke


DEMO_TOKEN_NAME = "demo"


class Command(BaseCommand):
    help = "Create the demo user (if missing) and print a fresh API token for it (revoking its earlier demo tokens)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo")
        parser.add_argument("--token-only", action="store_true", help="Print only the token.")
        parser.add_argument("--instructions", action="store_true", help="Also print how to chat.")
        parser.add_argument("--admin", action="store_true", help="Make the user a superuser (local demos only).")
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(
        self, *args, username: str, password: str, token_only: bool, instructions: bool, base_url: str,
        admin: bool, **options
    ) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
        if admin:
            user.is_staff = user.is_superuser = True
        if created or admin:
            user.save()
        revoked = api_tokens_revoke(tokens=ApiToken.objects.filter(user=user, name=DEMO_TOKEN_NAME))
        issued = api_token_create(user=user, name=DEMO_TOKEN_NAME)
        if token_only:
            self.stdout.write(issued.plaintext)
            return
        verb = "Created" if created else "Reusing"
        self.stdout.write(f"{verb} user '{username}' (password '{password}' if newly created).")
        self.stdout.write(f"API token: {issued.plaintext}" + (" (the earlier demo token is revoked)" if revoked else ""))
        if instructions:
            self.stdout.write(_INSTRUCTIONS.format(base=base_url, token=issued.plaintext))


_INSTRUCTIONS = """
In a browser: {base}/  (log in as the demo user; tool testing at {base}/tools/testing/,
your keys and tokens at {base}/settings/)

Chat through the API (the built-in demo model answers time and arithmetic questions with tools):

  export TOKEN={token}
  CONV=$(curl -s -X POST -H "Authorization: Bearer $TOKEN" {base}/api/conversations/ | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  curl -s -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \\
       -d '{{"content": "What time is it in Tokyo, and what is 17*23?"}}' {base}/api/conversations/$CONV/messages/
  # follow the run live over SSE (the events_sse URL in that reply), with the same Authorization header:
  #   curl -N -H "Authorization: Bearer $TOKEN" "<events_sse>"
  # (websocket clients send that header too, or the subprotocols ["chatforge.bearer", "$TOKEN"])
  curl -s -H "Authorization: Bearer $TOKEN" {base}/api/conversations/$CONV/messages/

Or from a terminal:  make chat MESSAGE="What time is it in Tokyo, and what is 17*23?"
  (the same as .venv/bin/python manage.py chat "…"; without MESSAGE it reads from stdin)
OpenAI clients: base URL {base}/v1 with the token above as API key.
API docs: {base}/api/docs/   Admin (runs, tools, providers): {base}/admin/ as the demo user
"""
