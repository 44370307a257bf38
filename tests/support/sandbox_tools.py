"""A sandboxed test tool for the stacks that run a sandbox worker
(CHATFORGE_TOOL_MODULES=tests.support.tools,tests.support.sandbox_tools):
the python tool with a short timeout, so that a test sees a sandbox stopped
at its wall time without waiting a minute."""

from __future__ import annotations

import dataclasses

from tools.builtin.python import PYTHON

QUICK_PYTHON = dataclasses.replace(PYTHON, name="quick_python",
                                   policy=dataclasses.replace(PYTHON.policy, timeout_s=10.0))
TOOLS = [QUICK_PYTHON]
