"""Re-encrypt every stored user secret with the first key of CHATFORGE_SECRET_KEYS."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from chatforge.accounts.secrets import user_secrets_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every user secret with the first key of CHATFORGE_SECRET_KEYS. Rotate a key by "
        "prepending a new one, running this, then removing the old one."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500, help="Rows read per query.")

    def handle(self, *args, batch_size: int, **options) -> None:
        report = user_secrets_rotate(batch_size=batch_size)
        summary = f"Re-encrypted {report.rotated} secret(s) with the first key."
        if report.changed_meanwhile:
            summary += f" {report.changed_meanwhile} changed meanwhile (already under the first key)."
        self.stdout.write(summary)
        if report.undecryptable:
            listed = ", ".join(f"user {user_id}: {name}" for user_id, name in report.undecryptable)
            # Non-zero exit: removing the old key now would lose these for good.
            raise CommandError(
                f"{len(report.undecryptable)} secret(s) could not be decrypted with any configured key "
                f"and were left as they are ({listed}). Add back the key that wrote them, or ask the users "
                "to set them again."
            )
