"""The tools API: what tools exist, and (staff) running one directly.

A sandboxed tool (``python``, script tools) is never run directly: its code
runs only on the sandbox worker, in a conversation's run, so invoking one is
a 409 ``not_runnable_by_hand`` that says so, whether or not runs are offered
it right now (``orchestration/services/tools_by_hand.py``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from chatforge.api import schema
from chatforge.catalog.catalog import get_catalog
from chatforge.catalog.code_tools import code_tool_names
from chatforge.catalog.describe import describe_tool
from chatforge.catalog.permissions import can_run_tools_by_hand
from chatforge.catalog.tool_runs import find_runnable_tool
from orchestration.services.tools_by_hand import NotRunnableByHand, by_hand_refusal, run_tool_by_hand
from tools.base import Tool


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.JSONField()
    kind = serializers.ChoiceField(choices=["code", "data", "mcp"])
    policy = serializers.JSONField()


class InvokeSerializer(serializers.Serializer):
    arguments = serializers.JSONField(required=False, default=dict, help_text="An object, or its JSON text.")


class ToolResultSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    result = serializers.JSONField(required=False)
    error = serializers.CharField(required=False)
    tool_name = serializers.CharField()
    execution_time_ms = serializers.IntegerField()


class ToolNotRunnableByHand(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "not_runnable_by_hand"


def _sandboxed_refusal(name: str) -> str | None:
    """The refusal for a sandboxed tool that exists but that runs are not
    offered now (no sandbox worker): the same words as when they are,
    rather than a 404 that would suggest the tool does not exist."""
    try:
        runnable = find_runnable_tool(name)
    except (ValueError, TypeError):  # a stored row that no longer builds: not found, as before
        return None
    return by_hand_refusal(runnable.tool) if runnable is not None else None


class CanRunToolsByHand(permissions.BasePermission):
    """The admin's rule for running a tool by hand (staff who may change tools)."""

    message = ("Running a tool directly needs a staff account with permission to change tools "
               "(catalog | tool definition | Can change).")

    def has_permission(self, request: Request, view) -> bool:
        return can_run_tools_by_hand(request.user)


class ToolViewSet(viewsets.ViewSet):
    lookup_field = "name"
    lookup_value_regex = r"[a-zA-Z0-9_-]{1,64}"

    @extend_schema(responses=ToolSerializer(many=True), examples=[schema.TOOL_LIST])
    def list(self, request: Request) -> Response:
        code_names = code_tool_names()
        return Response([describe_tool(tool, code_names) for tool in get_catalog(fresh=True).all()])

    @extend_schema(request=InvokeSerializer, responses=ToolResultSerializer,
                   examples=[schema.TOOL_INVOKE, schema.TOOL_RESULT])
    @action(detail=True, methods=["post"], permission_classes=[permissions.IsAuthenticated, CanRunToolsByHand])
    def invoke(self, request: Request, name: str) -> Response:
        payload = InvokeSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        catalog = get_catalog(fresh=True)
        tool = catalog.get(name)
        if tool is None:
            refusal = _sandboxed_refusal(name)
            if refusal is not None:
                raise ToolNotRunnableByHand(refusal)
            raise NotFound(f"No tool named '{name}'. Available tools: {', '.join(catalog.names())}.")
        try:
            result = run_tool_by_hand(tool, payload.validated_data["arguments"], user_id=request.user.id)
        except NotRunnableByHand as exc:
            raise ToolNotRunnableByHand(exc.message) from None
        return Response(result.as_dict())
