"""The ``python`` tool: code the model writes, run in a fresh sandbox
(docs/sandbox.md) with the conversation's files and no network.

Each call is a new process in a new sandbox: variables do not survive from
one call to the next, files do (those it saves are returned as files of the
conversation, and every call finds all of the conversation's files in
/mnt/data). Decision 0035 says why there is no session kept alive.
"""

from __future__ import annotations

from typing import Any

from tools.base import Tool, ToolContext, ToolPolicy
from tools.sandbox.calls import python_result, run_for_call
from tools.sandbox.command import INPUT_DIR, OUTPUT_DIR
from tools.sandbox_limits import SandboxLimits

MAX_CODE_CHARS = 100_000
PACKAGES = "numpy, pandas, matplotlib, scipy, sympy, openpyxl and pillow"


def run_python(arguments: dict[str, Any], context: ToolContext) -> str:
    return python_result(run_for_call("python", arguments["code"], context))


PYTHON = Tool(
    name="python",
    description=(
        "Run Python 3 code in a sandbox and get what it prints. Use it to compute exactly, to analyse "
        "data and to make charts or files. "
        f"The conversation's files are in {INPUT_DIR} (read-only, by name); files the code writes to the "
        f"working directory {OUTPUT_DIR} are returned to the user (save charts with plt.savefig('chart.png')). "
        f"Available: the standard library and {PACKAGES}; there is no network and nothing can be installed. "
        "Each call starts fresh: variables do not carry over, so save what a later call needs to a file "
        "(and read it back from /mnt/data). A last line that is an expression has its value printed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CODE_CHARS,
                "description": "The whole program to run.",
            }
        },
        "required": ["code"],
        "additionalProperties": False,
    },
    handler=run_python,
    # Idempotent: a second run of the same code makes the same files (saved
    # once per call: tools.files.FileAccess.save), and it reaches nothing
    # outside the sandbox. Not cached: code may read the clock or random numbers.
    policy=ToolPolicy(timeout_s=60.0, side_effects="idempotent", sandbox=SandboxLimits()),
)
