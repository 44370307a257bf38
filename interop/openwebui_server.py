"""Open WebUI as a child process: a free loopback port, a throw-away data
directory, ChatForge as its only connection, and nothing fetched from the
internet.

Its environment is built from scratch rather than inherited: Open WebUI
reads ``DATABASE_URL`` and ``REDIS_URL`` too, and would otherwise take
ChatForge's. Everything not set here is Open WebUI's default (native
function calling, its built-in tools, title/tags/follow-up generation),
except the task model, which is ChatForge's ``background-tasks`` alias.
Offline switches (``open_webui/env.py``, ``config.py`` of 0.12.4):
``OFFLINE_MODE`` sets ``HF_HUB_OFFLINE`` and turns off the version check,
the embedding/reranker/whisper auto-updates and plugin requirement installs;
the default embedding model is then looked up in the local cache only, and
its absence is logged (a traceback at start-up) without stopping the server.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

TASK_MODEL = "background-tasks"
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def openwebui_env(*, data_dir: Path, chatforge_url: str, chatforge_token: str) -> dict[str, str]:
    """Open WebUI's environment: ChatForge's ``/v1`` as its OpenAI connection, offline."""
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    env.update(
        DATA_DIR=str(data_dir),
        WEBUI_SECRET_KEY=secrets.token_urlsafe(32),
        OPENAI_API_BASE_URL=chatforge_url.rstrip("/") + "/v1",
        OPENAI_API_KEY=chatforge_token,
        ENABLE_OLLAMA_API="false",
        TASK_MODEL_EXTERNAL=TASK_MODEL,
        OFFLINE_MODE="true",
        HF_HUB_OFFLINE="1",
        RAG_EMBEDDING_MODEL_AUTO_UPDATE="false",
        RAG_RERANKING_MODEL_AUTO_UPDATE="false",
        WHISPER_MODEL_AUTO_UPDATE="false",
        ENABLE_VERSION_UPDATE_CHECK="false",
        # chromadb, Scarf and Hugging Face report usage unless told not to.
        ANONYMIZED_TELEMETRY="false",
        SCARF_NO_ANALYTICS="true",
        DO_NOT_TRACK="true",
        HF_HUB_DISABLE_TELEMETRY="1",
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass
class OpenWebUIProcess:
    url: str
    process: subprocess.Popen
    data_dir: Path
    log_path: Path
    startup_s: float = 0.0

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, keep_data: bool = False) -> None:
        """Stop the server (its own process group) and remove its data unless kept."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if not keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def start_openwebui(venv: Path, *, chatforge_url: str, chatforge_token: str, timeout_s: float = 240.0) -> OpenWebUIProcess:
    """Start ``open-webui serve`` and wait until ``/health`` answers."""
    data_dir = Path(tempfile.mkdtemp(prefix="openwebui-interop-"))
    port = free_port()
    log_path = data_dir / "open-webui.log"
    began = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=data_dir,  # anything it writes beside itself stays in the throw-away directory
            env=openwebui_env(data_dir=data_dir, chatforge_url=chatforge_url, chatforge_token=chatforge_token),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = OpenWebUIProcess(f"http://127.0.0.1:{port}", process, data_dir, log_path)
    deadline = began + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Open WebUI exited with {process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                server.startup_s = time.monotonic() - began
                return server
        except httpx.HTTPError:
            pass
        time.sleep(1)
    server.stop(keep_data=True)
    raise RuntimeError(f"Open WebUI did not answer /health within {timeout_s:g} s (log: {log_path})")
