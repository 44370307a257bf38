"""The tools package is plain Python: importable by the engine, Celery and benchmarks without Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def test_importing_tools_does_not_import_django() -> None:
    code = (
        "import sys, tools, tools.executor, tools.registry, tools.builtin; "
        "loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True, timeout=60
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_public_api_is_exported() -> None:
    import tools

    for name in ("Tool", "ToolPolicy", "ToolContext", "ToolRegistry", "build_registry", "execute_tool"):
        assert hasattr(tools, name)
