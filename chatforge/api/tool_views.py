"""The tools API: what tools exist, and (staff) running one directly."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from chatforge.api import schema
from chatforge.catalog.catalog import get_catalog
from chatforge.catalog.describe import tool_descriptions
from chatforge.catalog.permissions import can_run_tools_by_hand
from orchestration.services.tools_by_hand import run_tool_by_hand


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
        return Response(tool_descriptions())

    @extend_schema(request=InvokeSerializer, responses=ToolResultSerializer,
                   examples=[schema.TOOL_INVOKE, schema.TOOL_RESULT])
    @action(detail=True, methods=["post"], permission_classes=[permissions.IsAuthenticated, CanRunToolsByHand])
    def invoke(self, request: Request, name: str) -> Response:
        payload = InvokeSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        catalog = get_catalog(fresh=True)
        tool = catalog.get(name)
        if tool is None:
            raise NotFound(f"No tool named '{name}'. Available tools: {', '.join(catalog.names())}.")
        result = run_tool_by_hand(tool, payload.validated_data["arguments"], user_id=request.user.id)
        return Response(result.as_dict())
