"""A bounded schemathesis run against the live OpenAPI schema, every
operation: no 5xx, no response that breaks its schema, no status code or
content type the schema does not list (the examples,
the coverage phase's boundary values and up to 50 generated cases per
operation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# The schemathesis run alone takes minutes on two busy cores (the suite's 300 s
# per test would end it): the subprocess has 900 s and so has the test.
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(960)]


def test_schemathesis_finds_no_server_errors_and_no_schema_violations(stack, make_user, tmp_path: Path):
    _, token = make_user()
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", f"{stack.http_url}/api/schema/",
        "--checks", "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance",
        "--max-examples", "50",
        "--header", f"Authorization: Bearer {token}",
        "--request-timeout", "30",
        "--phases", "examples,coverage,fuzzing",
        # Model tests wait for a whole run; they are exercised by their own test.
        "--exclude-path-regex", "tools/test",
        "--no-color",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    report = result.stdout[-6000:] + result.stderr[-2000:]
    print(report)
    assert result.returncode == 0, report + "\n" + stack.logs()[-3000:]
