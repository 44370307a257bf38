"""The sandbox that runs the python tool and script tools (docs/sandbox.md)."""

from __future__ import annotations

from chatforge.settings.base import BASE_DIR
from chatforge.settings.env import env
from chatforge.settings.mode import EMBEDDED

# Whether sandboxed tools are offered at all. Embedded mode has no sandbox
# worker, so they are off there (and cannot be switched on: the sandbox
# runs only on a worker of its own queue).
CHATFORGE_SANDBOX_ENABLED: bool = (not EMBEDDED) and env.bool("CHATFORGE_SANDBOX_ENABLED", default=True)
# The sandbox's own Python environment (requirements-sandbox.txt): made by
# `make sandbox` here, at /opt/chatforge-sandbox in the image.
CHATFORGE_SANDBOX_PYTHON: str = env.str("CHATFORGE_SANDBOX_PYTHON", default=str(BASE_DIR / ".sandbox-python"))
CHATFORGE_SANDBOX_BWRAP: str = env.str("CHATFORGE_SANDBOX_BWRAP", default="bwrap")
# The unprivileged uid and gid a worker running as root runs its sandboxes as.
CHATFORGE_SANDBOX_UID: int = env.int("CHATFORGE_SANDBOX_UID", default=65534)
# Where each call's job directory (the code, copies of its input files, the
# files it returns) is made; the system's temporary directory when unset.
CHATFORGE_SANDBOX_TMP_DIR: str | None = env.str("CHATFORGE_SANDBOX_TMP_DIR", default=None) or None
# How long a sandbox worker's report that it can run sandboxes holds: the
# catalog offers sandboxed tools only while one has reported within it
# (each worker reports every third of it).
CHATFORGE_SANDBOX_REPORT_TTL_S: float = env.float("CHATFORGE_SANDBOX_REPORT_TTL_S", default=90.0)
