"""Open WebUI in a venv of its own, with a CPU-only torch, made once and reused.

Open WebUI pins ~90 packages (fastapi, pydantic, openai 2.x …) that clash
with the project's own pins, so it never goes into `.venv`. Its
dependencies (sentence-transformers, accelerate) pull torch, and PyPI's
default torch on x86_64 Linux is the CUDA build, which brings ~3 GB of
nvidia-* wheels that a CPU-only check never uses. So torch is installed
first, from wherever pip finds a CPU build (a resolution without nvidia-*
packages), else from PyTorch's CPU index; then open-webui with a constraint
that keeps that torch. Nothing beyond open-webui's own required
dependencies is installed (no extras).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OPEN_WEBUI_VERSION = "0.12.4"
TORCH_VERSION = os.environ.get("OPENWEBUI_TORCH_VERSION", "2.13.0")
TORCH_CPU_INDEX = os.environ.get("OPENWEBUI_TORCH_INDEX_URL", "https://download.pytorch.org/whl/cpu")
# Open WebUI 0.12.4 takes Python 3.11 or 3.12; the project's own by default.
PYTHON = os.environ.get("OPENWEBUI_PYTHON", sys.executable)
CONSTRAINTS_NAME = "interop-constraints.txt"


@dataclass
class InstallReport:
    """What `ensure_venv` did, for the check's printout."""

    venv: Path
    reused: bool
    seconds: float
    torch: str
    torch_source: str
    size_mb: int


def _pip(venv: Path, *args: str, log: Callable[[str], None]) -> None:
    command = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args]
    log("$ " + " ".join(command[2:]))
    subprocess.run(command, check=True)


def installed_version(venv: Path, package: str) -> str | None:
    """The version of `package` in the venv, or None (no venv, not installed)."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        check=False,
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def _needs_cuda_wheels(venv: Path, requirement: str) -> bool:
    """Whether pip, left to itself, would install a CUDA torch (nvidia-* packages).

    A dry run reads only the packages' metadata, so asking costs no download.
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install",
             "--quiet", "--dry-run", "--ignore-installed", "--report", str(report), requirement],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        names = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    return any(name.startswith("nvidia-") or name == "triton" for name in names)


def _size_mb(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total // (1024 * 1024)


def ensure_venv(venv: Path, log: Callable[[str], None] = print) -> InstallReport:
    """Make (or reuse) `venv` with open-webui==OPEN_WEBUI_VERSION and a CPU torch."""
    began = time.monotonic()
    if installed_version(venv, "open-webui") == OPEN_WEBUI_VERSION:
        return InstallReport(venv, True, 0.0, installed_version(venv, "torch") or "?", "cached", _size_mb(venv))
    log(f"installing open-webui=={OPEN_WEBUI_VERSION} into {venv} (once; several minutes)")
    if not (venv / "bin" / "python").exists():
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", "--quiet", "--upgrade", "pip", log=log)

    torch_requirement = f"torch=={TORCH_VERSION}"
    torch_source = "default index"
    if installed_version(venv, "torch") is None:
        if _needs_cuda_wheels(venv, torch_requirement):
            torch_source = TORCH_CPU_INDEX
            _pip(venv, "install", "--quiet", "--index-url", TORCH_CPU_INDEX, torch_requirement, log=log)
        else:
            _pip(venv, "install", "--quiet", torch_requirement, log=log)
    torch = installed_version(venv, "torch") or "?"
    constraints = venv / CONSTRAINTS_NAME
    constraints.write_text(f"torch=={torch}\n")
    _pip(venv, "install", "--quiet", "-c", str(constraints), f"open-webui=={OPEN_WEBUI_VERSION}", log=log)
    return InstallReport(venv, False, time.monotonic() - began, torch, torch_source, _size_mb(venv))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".venv-openwebui")
    print(ensure_venv(target.resolve()))
