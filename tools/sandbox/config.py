"""Where the sandbox's parts are on this host (``SandboxConfig``) and the
private directory each call gets."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass

# The unprivileged user a root worker runs its sandboxes as: the kernel
# counts processes (RLIMIT_NPROC) for every user but root.
NOBODY = 65534


@dataclass(frozen=True)
class SandboxConfig:
    bwrap: str = "bwrap"  # the bubblewrap program (a name on PATH or a path)
    python_env: str = ""  # the sandbox's own virtualenv: numpy, pandas, matplotlib… (requirements-sandbox.txt)
    run_as: int = NOBODY  # uid and gid of the sandbox when the worker runs as root
    tmp_dir: str | None = None  # where each call's job directory is made (None: the system's)

    @property
    def python_env_path(self) -> str:
        """The environment's real path (the host resolves links in it: the
        sandbox's user may not be able to search the directories a link
        lives in, as a checkout under /root)."""
        return os.path.realpath(self.python_env) if self.python_env else ""

    @property
    def python(self) -> str:
        return os.path.join(self.python_env_path, "bin", "python")

    def bwrap_path(self) -> str | None:
        return shutil.which(self.bwrap)

    def drops_to(self) -> int | None:
        """The uid the sandbox runs as, when it is not this process's own."""
        return self.run_as if os.geteuid() == 0 else None


def job_directory(config: SandboxConfig) -> str:
    """A fresh private directory for one call, readable by the sandbox's user."""
    path = tempfile.mkdtemp(prefix="chatforge-sandbox-", dir=config.tmp_dir)
    uid = config.drops_to()
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def hand_over(config: SandboxConfig, path: str) -> None:
    """Make a file the runner wrote readable by the sandbox's user."""
    uid = config.drops_to()
    if uid is not None:
        os.chown(path, uid, uid)
