"""The python tool and script tools over the real sandbox, without Django:
the executor runs them as the engine does, with an in-memory conversation
(``FileAccess``) whose files go in under /mnt/data and whose saved files are
what the code left in /mnt/output."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import BinaryIO

import pytest

from tests.support.sandbox import processes_of, sandbox_config
from tools.base import Tool, ToolContext, ToolPolicy
from tools.builtin.python import PYTHON
from tools.executor import execute_tool
from tools.files import DEFAULT_PAGE_CHARS, FileInfo, FileNotInConversation, TextPage
from tools.registry import ToolRegistry
from tools import tool
from tools.sandbox.calls import python_result, run_for_call, script_handler
from tools.sandbox.runner import BwrapSandbox
from tools.sandbox_limits import SandboxLimits

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass
class Conversation:
    """A conversation's files in memory: what ``FileAccess`` promises."""

    infos: dict[str, FileInfo] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    saved: dict[str, bytes] = field(default_factory=dict)

    def add(self, name: str, data: bytes, content_type: str = "text/csv") -> FileInfo:
        file_id = f"00000000-0000-4000-8000-{len(self.infos):012d}"
        info = FileInfo(file_id, name, content_type, "document", len(data), "ready")
        self.infos[file_id], self.data[file_id] = info, data
        return info

    def list(self) -> list[FileInfo]:
        return list(self.infos.values())

    def info(self, file_id: str) -> FileInfo | None:
        return self.infos.get(file_id)

    def read_text(self, file_id: str, *, offset: int = 0, limit: int = DEFAULT_PAGE_CHARS) -> TextPage:
        raise NotImplementedError

    def open_bytes(self, file_id: str) -> BinaryIO:
        if file_id not in self.data:
            raise FileNotInConversation(file_id)
        return io.BytesIO(self.data[file_id])

    def save(self, name: str, data: bytes | BinaryIO, *, content_type: str | None = None) -> FileInfo:
        body = data if isinstance(data, bytes) else data.read()
        self.saved[name] = body
        return self.add(name, body, content_type or "application/octet-stream")


@pytest.fixture(scope="module")
def config():
    return sandbox_config()


def call(config, arguments: dict, *, files: Conversation | None = None, tool: Tool = PYTHON, wall_s: float = 30,
         limits: SandboxLimits | None = None, sandboxed: bool = True):
    registry = ToolRegistry()
    registry.register(tool)
    sandbox = BwrapSandbox(config, limits or tool.policy.sandbox or SandboxLimits(), wall_s=wall_s) if sandboxed else None
    result = execute_tool(registry, tool.name, arguments, context=ToolContext(files=files, sandbox=sandbox))
    assert processes_of(config) == []
    return result


def test_what_the_code_prints_is_the_result(config) -> None:
    result = call(config, {"code": "print(6 * 7)"})
    assert result.status == "success"
    assert result.result == "42"


def test_a_last_expression_is_printed_as_in_a_notebook(config) -> None:
    assert call(config, {"code": "x = [1, 2]\nx + [3]"}).result == "[1, 2, 3]"


def test_code_that_prints_nothing_is_told_how_to_show_something(config) -> None:
    result = call(config, {"code": "x = 1"})
    assert "printed nothing" in result.result and "/mnt/output" in result.result


def test_the_conversations_files_go_in_and_the_files_it_writes_come_back(config) -> None:
    files = Conversation()
    files.add("sales.csv", b"month,amount\nJan,10\nFeb,30\nMar,20\n")
    code = """
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("/mnt/data/sales.csv")
df.plot(x="month", y="amount")
plt.savefig("chart.png")
df.assign(double=df.amount * 2).to_csv("doubled.csv", index=False)
print(df.amount.sum())
"""
    result = call(config, {"code": code}, files=files)
    assert result.status == "success", result.error
    assert result.result == "60"
    assert set(files.saved) == {"chart.png", "doubled.csv"}
    assert files.saved["chart.png"].startswith(PNG_MAGIC)
    assert files.saved["doubled.csv"].decode().splitlines()[1] == "Jan,10,20"


def test_two_files_of_one_name_get_names_of_their_own(config) -> None:
    files = Conversation()
    files.add("data.csv", b"first")
    files.add("data.csv", b"second")
    result = call(config, {"code": "import os\nprint(sorted(os.listdir('/mnt/data')))"}, files=files)
    assert result.result == "['data (2).csv', 'data.csv']"


def test_an_exception_comes_back_as_the_tracebacks_last_lines(config) -> None:
    result = call(config, {"code": "def f(x):\n    return 1 / x\n\nf(0)\n"})
    assert result.status == "error"
    assert "raised ZeroDivisionError" in result.error
    assert 'File "main.py", line 4' in result.error and "return 1 / x" in result.error
    assert "launcher" not in result.error
    assert "Fix the code" in result.error


def test_a_missing_file_error_says_where_the_files_are(config) -> None:
    result = call(config, {"code": "open('sales.csv').read()"})
    assert "FileNotFoundError" in result.error and "/mnt/data" in result.error


def test_code_that_runs_too_long_is_stopped_with_what_it_printed(config) -> None:
    # 10 s: time enough to start and print on a loaded machine, too.
    result = call(config, {"code": "import time\nprint('started', flush=True)\ntime.sleep(600)"}, wall_s=10)
    assert result.status == "error"
    assert "ran longer than 10 s" in result.error
    assert "started" in result.error


def test_without_a_sandbox_the_code_never_runs(config) -> None:
    result = call(config, {"code": "print(1)"}, sandboxed=False)
    assert result.status == "error"
    assert "runs only in the sandbox" in result.error


def test_a_script_tool_gets_its_arguments_and_returns_printed_json(config) -> None:
    script = "import json, statistics\nprint(json.dumps({'mean': statistics.mean(args['values'])}))"
    tool = Tool(name="mean", description="The mean of numbers.",
                parameters={"type": "object", "properties": {"values": {"type": "array", "items": {"type": "number"}}},
                            "required": ["values"]},
                handler=script_handler("mean", script),
                policy=ToolPolicy(timeout_s=30, sandbox=SandboxLimits()))
    result = call(config, {"values": [1, 2, 6]}, tool=tool)
    assert result.status == "success", result.error
    assert result.result == {"mean": 3}
    assert json.loads(result.output_text()) == {"mean": 3}


def test_a_script_tool_printing_text_returns_the_text(config) -> None:
    tool = Tool(name="hello", description="Greets.", parameters={"type": "object", "properties": {}},
                handler=script_handler("hello", "print('hello', args)"), policy=ToolPolicy(sandbox=SandboxLimits()))
    assert call(config, {}, tool=tool).result == "hello {}"


def test_the_documented_sandboxed_code_tool_works_as_written(config) -> None:
    # docs/sandbox.md, "Your own sandboxed tools", as written there.
    @tool(timeout_s=30, side_effects="idempotent", sandbox=SandboxLimits(memory_mb=512))
    def summarise_csv(name: str, context: ToolContext) -> str:
        """Summary statistics of one of the conversation's CSV files.

        Args:
            name: The file's name, as list_files shows it.
        """
        code = f"import pandas as pd\nprint(pd.read_csv('/mnt/data/' + {name!r}).describe())"
        return python_result(run_for_call("summarise_csv", code, context))

    files = Conversation()
    files.add("sales.csv", b"amount\n10\n30\n20\n")
    assert summarise_csv.policy.sandbox == SandboxLimits(memory_mb=512)
    result = call(config, {"name": "sales.csv"}, files=files, tool=summarise_csv)
    assert result.status == "success", result.error
    assert "mean" in result.result and "20.0" in result.result
