"""Create or update data tools and assistants from a JSON or YAML file.

    {"tools": [{"name": "...", "kind": "http", "description": "...", "parameters": {...},
                "url": "...", ...}],
     "assistants": [{"name": "...", "system_prompt": "...", "tools": ["..."]}]}

A tool entry takes any field of ``ToolDefinition``: a script tool
(``"kind": "script"``) its ``script`` and the ``sandbox_*`` limits, any tool
``cache_ttl_s`` and ``cache_scope``; a field left out keeps its default (or,
for an existing tool, its stored value). docs/tool-catalog.md lists them.

Every entry is validated like an admin save; nothing is written unless the
whole file is valid.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from chatforge.catalog.catalog import unknown_tools_problem
from chatforge.catalog.models import Assistant, ToolDefinition

_TOOL_FIELDS = {f.name for f in ToolDefinition._meta.fields} - {"id", "created_at", "updated_at"}
_ASSISTANT_FIELDS = {f.name for f in Assistant._meta.fields} - {"id", "created_at", "updated_at"}


def _load(path: Path) -> dict:
    text = path.read_text()
    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise CommandError(f"{path} is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: {exc}")
    if not isinstance(data, dict):
        raise CommandError(f'{path} must hold an object with "tools" and/or "assistants" lists.')
    return data


def _apply(model, fields: set[str], entry: dict, where: str):
    unknown = set(entry) - fields
    if unknown:
        raise CommandError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}.")
    if "name" not in entry:
        raise CommandError(f"{where}: needs a name.")
    obj = model.objects.filter(name=entry["name"]).first() or model(name=entry["name"])
    for key, value in entry.items():
        setattr(obj, key, value)
    try:
        obj.full_clean()
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
        raise CommandError(f"{where} ({entry['name']}): {problems}") from None
    # The tools loaded above are in the catalog already (same transaction).
    problem = unknown_tools_problem(obj.tools) if isinstance(obj, Assistant) else None
    if problem:
        raise CommandError(f"{where} ({entry['name']}): tools: {problem}")
    obj.save()
    return obj


class Command(BaseCommand):
    help = "Create or update data tools and assistants from a JSON or YAML file."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", type=Path)

    def handle(self, *args, path: Path, **options) -> None:
        if not path.exists():
            raise CommandError(f"No such file: {path}")
        data = _load(path)
        with transaction.atomic():
            tools = [_apply(ToolDefinition, _TOOL_FIELDS, e, f"tools[{i}]") for i, e in enumerate(data.get("tools", []))]
            assistants = [
                _apply(Assistant, _ASSISTANT_FIELDS, e, f"assistants[{i}]") for i, e in enumerate(data.get("assistants", []))
            ]
        self.stdout.write(f"Loaded {len(tools)} tool(s) and {len(assistants)} assistant(s) from {path}.")
