"""Which tool calls of a run wait for a person's approval, and what the model
is told when one is not run.

Decided once, when the run starts, and stored in its options
(``approval_tools``): a tool's own policy (``requires_approval`` on a code
tool or a data tool) with the assistant's overrides applied. A run then
asks for exactly what was true when it was posted, even if an admin edits
the tool meanwhile, and no step looks the policy up again.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from chatforge.catalog.models import Assistant
from chatforge.errors import ApprovalRequired
from tools.registry import ToolRegistry

# Run options: the run's tools that ask first, and — for /v1, which cannot
# ask — "deny" when such calls are answered with an error instead.
APPROVAL_TOOLS = "approval_tools"
APPROVAL_MODE = "approval"
UNATTENDED_DENY = "deny"


def tools_needing_approval(registry: ToolRegistry, tools: Iterable[str], assistant: Assistant | None) -> list[str]:
    """The names among ``tools`` whose calls wait for approval."""
    required = set(assistant.approval_required_tools or []) if assistant else set()
    waived = set(assistant.approval_waived_tools or []) if assistant else set()
    asking = []
    for name in tools:
        tool = registry.get(name)
        by_policy = tool is not None and tool.policy.requires_approval
        if name not in waived and (by_policy or name in required):
            asking.append(name)
    return asking


def unattended_tools(tools: list[str], asking: list[str], *, named: bool) -> tuple[list[str], dict]:
    """For a request that cannot ask anyone (/v1): the tools it keeps, and
    the run options that say what happens to calls that needed approval.

    CHATFORGE_V1_APPROVAL=deny: the tools stay offered, and each such call
    gets an error result saying it needs approval. =reject: a request that
    named such tools is refused (400, naming them); one that named none
    (every enabled tool) simply is not offered them."""
    if not asking:
        return tools, {}
    if settings.CHATFORGE_V1_APPROVAL == "reject":
        if named:
            raise ApprovalRequired(
                f"These tools need a person's approval for each call, which /v1/chat/completions cannot "
                f"ask for: {', '.join(asking)}. Leave them out of 'tools', or use the ChatForge API "
                "(POST /api/conversations/{id}/messages/) where the user can approve each call.",
                details={"field": "tools", "approval_required": asking},
            )
        return [name for name in tools if name not in asking], {}
    return tools, {APPROVAL_TOOLS: asking, APPROVAL_MODE: UNATTENDED_DENY}


def declined_output(name: str, reason: str) -> str:
    reason = reason.strip()
    if reason and reason[-1] not in ".!?":
        reason += "."
    because = f" Their reason: {reason}" if reason else ""
    return (
        f"Error: the user declined to run '{name}', so it was not run.{because} "
        "Do not call it again for this; answer without it, or ask the user how they want to proceed."
    )


def expired_output(name: str, waited_s: float) -> str:
    return (
        f"Error: '{name}' needs the user's approval for each call, and none was given within "
        f"{_duration(waited_s)}, so it was not run. Tell the user what you wanted to do with it; "
        "they can ask again when they are there to approve it."
    )


def unattended_output(name: str) -> str:
    return (
        f"Error: '{name}' needs a person's approval for each call, and this request (through the "
        "OpenAI-compatible API) has no way to ask for it, so it was not run. Answer without it."
    )


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return f"{seconds:g} seconds"
