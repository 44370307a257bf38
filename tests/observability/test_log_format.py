"""uvicorn hands its messages a second time with ANSI colour codes, as the
``color_message`` extra; the project's formatter (JSON and text, configured
as ``serve`` configures uvicorn) writes the plain message and other extras,
never that field or its escape codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.stack import ROOT, base_env

COLOR_MESSAGE = "Started server process [\x1b[36m%d\x1b[0m]"
# A process configured as `serve` configures uvicorn, logging as uvicorn does.
LOG_AS_UVICORN = """
import logging, logging.config, sys
import django
django.setup()
from chatforge.settings.logging import uvicorn_log_config
logging.config.dictConfig(uvicorn_log_config())
logging.getLogger("uvicorn.error").info(
    "Started server process [%d]", 4242, extra={"color_message": sys.argv[1], "tool_name": "calculator"})
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_uvicorn_color_message_is_not_written(log_format):
    done = subprocess.run([sys.executable, "-c", LOG_AS_UVICORN, COLOR_MESSAGE], cwd=ROOT, check=False,
                          env=base_env(CHATFORGE_LOG_FORMAT=log_format), capture_output=True, text=True,
                          timeout=60)

    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "Started server process" in line]
    assert "color_message" not in line
    for escape in ("\x1b", "\\x1b", "\\u001b", "\\033", "[36m"):
        assert escape not in line, line
    assert "calculator" in line  # the other extras are kept
    if log_format == "json":
        record = json.loads(line)
        assert record["event"] == "Started server process [4242]"
        assert record["tool_name"] == "calculator"
        assert "color_message" not in record
    else:
        assert "Started server process [4242]" in line
