"""What goes into the image's build context. BuildKit reads
deploy/Dockerfile.dockerignore beside the Dockerfile; the legacy builder
(docker-compose v1's default) reads only the .dockerignore at the root of the
context, which compose sets to the repository root. Both lists must be the
same, and keep the venvs, Git, local databases and secrets out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.support.stack import ROOT

DEPLOY = ROOT / "deploy"
MUST_EXCLUDE = [".git/HEAD", ".venv/bin/python", ".venv-lock/bin/python", "chatforge/__pycache__/env.cpython-311.pyc",
                "tools/x.pyc", "chatforge.sqlite3", "chatforge.sqlite3-wal", "deploy/.env", ".env",
                "node_modules/x/index.js", "staticfiles/admin/css/base.css", ".pytest_cache/v/x", "bench/results/x.json",
                "deploy/local/ensure-services.sh", ".ci/run", "celerybeat-schedule"]
MUST_INCLUDE = ["manage.py", "requirements.txt", "constraints.txt", "deploy/Dockerfile", "chatforge/settings/base.py",
                "orchestration/tasks.py", "tools/registry.py", "chatforge/web/static/web/chat.js"]


def rules(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _pattern(rule: str) -> re.Pattern[str]:
    """A .dockerignore rule as Docker matches it (Go's filepath.Match, plus
    ``**`` for any number of directories), anchored at the context root."""
    out = ""
    for token in re.split(r"(\*\*/|\*\*|\*|\?)", rule.strip("/")):
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
    return re.compile(out)


def excluded(path: str, patterns: list[re.Pattern[str]]) -> bool:
    """A path is left out when it or one of its directories matches a rule."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(pattern.fullmatch(prefix) for pattern in patterns for prefix in prefixes)


def test_the_root_list_is_the_same_as_the_dockerfiles():
    assert rules(ROOT / ".dockerignore") == rules(DEPLOY / "Dockerfile.dockerignore")


def test_compose_builds_from_the_repository_root():
    """So the root .dockerignore is the one the legacy builder reads."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    builds = [service["build"] for service in compose["services"].values() if "build" in service]
    assert builds
    for build in builds:
        assert (DEPLOY / build["context"]).resolve() == ROOT
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


@pytest.mark.parametrize("ignore_file", [ROOT / ".dockerignore", DEPLOY / "Dockerfile.dockerignore"],
                         ids=["root", "beside-the-dockerfile"])
def test_venvs_git_databases_and_secrets_stay_out_and_the_code_goes_in(ignore_file):
    listed = rules(ignore_file)
    assert not [rule for rule in listed if rule.startswith("!")]  # no exceptions: excluded() ignores them
    patterns = [_pattern(rule) for rule in listed]

    assert [path for path in MUST_EXCLUDE if not excluded(path, patterns)] == []
    assert [path for path in MUST_INCLUDE if excluded(path, patterns)] == []
