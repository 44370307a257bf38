"""Serve ChatForge over HTTP and websockets with uvicorn.

In embedded mode this is the whole system in one process (the ASGI module
starts the worker threads). In distributed mode it is one web process; run
`celery -A chatforge worker` processes beside it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from chatforge.observability.worker_setup import use_fresh_metrics_dir
from chatforge.settings.logging import uvicorn_log_config


class Command(BaseCommand):
    help = "Run the ASGI server (HTTP + websockets)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=1, help="Web processes (distributed mode).")

    def handle(self, *args, host: str, port: int, workers: int, **options) -> None:
        import uvicorn  # the server's own import, in the process that serves only

        if settings.EMBEDDED and workers != 1:
            self.stderr.write("Embedded mode runs one process; ignoring --workers.")
            workers = 1
        if workers > 1:
            # Each web process counts on its own; /metrics serves the sum.
            use_fresh_metrics_dir()
        self.stdout.write(
            f"ChatForge ({settings.CHATFORGE_MODE} mode) on http://{host}:{port}/  "
            f"API docs: http://{host}:{port}/api/docs/"
        )
        uvicorn.run(
            "chatforge.asgi:application",
            host=host,
            port=port,
            workers=workers,
            lifespan="off",
            log_level=settings.LOG_LEVEL.lower(),
            # uvicorn's own lines through ChatForge's handler: structured (JSON
            # in distributed mode), with API tokens and keys removed from the
            # paths it logs (a websocket's ?token= landed in every log line).
            log_config=uvicorn_log_config(),
            ws="websockets-sansio",
            # uvloop's event loop and the httptools parser (both pinned in
            # requirements.txt): about 0.5 ms less per request than asyncio's
            # loop and h11, measured (docs/performance.md).
            loop="uvloop",
            http="httptools",
        )
