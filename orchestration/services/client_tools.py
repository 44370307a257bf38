"""Tools of a /v1 client: offered to the model beside the server's, never run
here. A round that calls one ends the run with ``finish_reason:
"tool_calls"`` once the round's server calls are done; the client runs its
tools and sends their results with its next request, which starts a run
that carries on from those rounds (``Run.continued_rounds``).
docs/decisions/0016-client-tools-end-the-run.md has the why.
"""

from __future__ import annotations

from chatforge.conversations.models import Run, ToolInvocation


def client_tool_names(run: Run) -> frozenset[str]:
    return frozenset(spec["function"]["name"] for spec in run.options.get("client_tools", ()))


def round_awaits_client(run: Run, iteration: int) -> bool:
    """Whether the round called a client tool (only runs that have client
    tools ask the database)."""
    if not run.options.get("client_tools"):
        return False
    return ToolInvocation.objects.filter(
        run_id=run.pk, iteration=iteration, status=ToolInvocation.Status.CLIENT).exists()
