"""A request's tools, sorted into the server's and the client's own, and the
tool rounds a client's next request carries on from.

A full function spec whose name is not a server tool is the client's: the
model is offered it, and a call of it ends the run with ``finish_reason:
"tool_calls"`` for the client to run (docs/decisions/0016-client-tools-end-the-run.md).
A spec that names a server tool is that tool, unless it declares parameters
other than the server tool's: then the client means a tool of its own under
a name the server already uses. A request with only the client's own tools
gets the server's default tools beside them (docs/decisions/0031-v1-server-tools-beside-client-tools.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from chatforge.api.openai_errors import OpenAIError
from chatforge.catalog.catalog import get_catalog
from chatforge.conversations.models import LlmTurn, ToolInvocation
from orchestration.transcript.rounds import run_rounds

from .translate import MISSING_TOOL_RESULT


def _parameter_names(schema: Any) -> frozenset[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return frozenset(properties) if isinstance(properties, Mapping) else frozenset()


def split_tools(names: list[str] | None, specs: Mapping[str, dict[str, Any]]) -> tuple[list[str] | None, list[dict]]:
    """``(server tool names, client tool specs)``; ``None`` for the server's
    names means "the server's default tools".

    A request that names no server tool but brings tools of its own (Open
    WebUI sends some 36 of its built-in tools on every chat) gets the
    server's default tools beside its own, rather than none of them: the
    client told ChatForge nothing about the server's tools, and the operator
    chose the defaults for such requests. A client spec with a server tool's
    name but other parameters is then the client's, and the server leaves
    its own tool of that name out of this request (the engine drops it from
    the defaults). Where the request does name server tools, such a spec is
    a conflict the client must resolve (400 ``tool_name_conflict``). Names
    that are neither stay with the server's, whose check answers "Unknown
    tool(s)"."""
    if names is None:
        return None, []
    registry = get_catalog()
    server: list[str] = []
    client: list[dict] = []
    conflicts: list[tuple[str, frozenset[str], frozenset[str]]] = []
    for name in names:
        spec = specs.get(name)
        tool = registry.get(name)
        if tool is not None:
            theirs = _parameter_names(spec["function"]["parameters"]) if spec is not None else None
            if theirs and theirs != _parameter_names(tool.parameters):
                conflicts.append((name, theirs, _parameter_names(tool.parameters)))
                client.append(spec)
            else:
                server.append(name)
        elif spec is not None:
            client.append(spec)
        else:
            server.append(name)
    if conflicts and server:
        name, theirs, ours = conflicts[0]
        raise OpenAIError(
            f"The tool '{name}' in 'tools' has the name of a server tool, which ChatForge runs "
            f"itself, but other parameters ({', '.join(sorted(theirs)) or 'none'}; the server's: "
            f"{', '.join(sorted(ours)) or 'none'}). Rename your tool "
            f"to have it called on your side, or send just the name '{name}' to use the server's.",
            status=400, param="tools", code="tool_name_conflict",
        )
    if client and not server:
        return None, client
    return server, client


def continued_rounds(*, user: AbstractBaseUser, rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rounds a request carries on from. When the calls of its last
    round are an earlier run's calls of the client's tools (found by id
    among the user's runs), that run's rounds are taken from the ledger —
    the server's calls and results included, which the client never saw —
    with the client's results put in; otherwise the rounds as the client
    sent them."""
    if not rounds:
        return []
    call_ids = [call["id"] for call in rounds[-1]["tool_calls"]]
    earlier = (
        ToolInvocation.objects.select_related("run")
        .filter(run__user=user, tool_call_id__in=call_ids, status=ToolInvocation.Status.CLIENT)
        .order_by("-created_at")
        .first()
    )
    if earlier is None:
        return rounds
    run = earlier.run
    ledger = run_rounds(run, LlmTurn.objects.filter(run=run), ToolInvocation.objects.filter(run=run))
    sent = {result["tool_call_id"]: result for rnd in rounds for result in rnd["results"]
            if result["output"] != MISSING_TOOL_RESULT}
    for rnd in ledger:
        for result in rnd["results"]:
            if result["status"] != ToolInvocation.Status.CLIENT:
                continue
            answer = sent.get(result["tool_call_id"])
            result.update(output=answer["output"] if answer else MISSING_TOOL_RESULT,
                          status="success" if answer else "error")
    return ledger
