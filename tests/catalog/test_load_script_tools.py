"""``manage.py load_tools`` loads script tools with their sandbox limits and
any tool's caching fields, checked like an admin save."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import CommandError, call_command

from chatforge.catalog.models import ToolDefinition

pytestmark = pytest.mark.django_db

SCRIPT_TOOL = {
    "name": "word_count",
    "kind": "script",
    "description": "Count the words of a text.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "script": "import json\nprint(json.dumps({'words': len(args['text'].split())}))\n",
    "timeout_s": 20,
    "cache_ttl_s": 600,
    "cache_scope": "global",
    "sandbox_cpu_s": 5,
    "sandbox_memory_mb": 256,
}


def load(tmp_path, tools: list[dict]) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": tools}))
    call_command("load_tools", str(path))


def test_a_script_tool_loads_with_its_limits_and_cache(tmp_path):
    load(tmp_path, [SCRIPT_TOOL])

    saved = ToolDefinition.objects.get(name="word_count")
    assert saved.kind == "script" and "args['text']" in saved.script
    assert (saved.cache_ttl_s, saved.cache_scope) == (600, "global")
    limits = saved.sandbox_limits()
    assert (limits.cpu_s, limits.memory_mb, limits.max_processes) == (5, 256, 32)  # unset: the default


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"script": "print(("}, "script: Not valid Python: '(' was never closed (line 1)."),
        ({"side_effects": "not_idempotent"}, "cache_ttl_s: Only read-only and idempotent tools may be cached"),
        ({"sandbox_work_mb": 0}, "sandbox_work_mb: At least 1."),
    ],
)
def test_a_bad_script_tool_is_refused_naming_the_field(tmp_path, overrides, fragment):
    with pytest.raises(CommandError) as refused:
        load(tmp_path, [{**SCRIPT_TOOL, **overrides}])

    assert fragment in str(refused.value)
    assert not ToolDefinition.objects.exists()
