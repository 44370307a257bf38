"""Model validation and the list of configured models."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatforge.api import schema
from chatforge.api.errors import error_body
from chatforge.llm.listing import model_list
from chatforge.llm.validation import may_record_validation
from orchestration.services.model_tests import TestTimedOut, model_test_run

from .throttles import MessagePostThrottle


class ToolTestRequest(serializers.Serializer):
    query = serializers.CharField(max_length=10_000)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True)
    tools = serializers.ListField(child=serializers.CharField(max_length=64), required=False, allow_null=True)
    timeout_s = serializers.FloatField(required=False, min_value=1, max_value=600, default=120)
    record = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="Count this test toward the model's shared validation status. Omitted: yes for staff, "
                  "no for anyone else; true is for staff only (403 otherwise).",
    )


class ToolTestView(APIView):
    # Each test starts a run: it is limited like posting a message (the same
    # per-user rate, shared counts) and by the same active-run cap.
    throttle_classes = [MessagePostThrottle]

    @extend_schema(request=ToolTestRequest, responses={200: dict, 504: dict},
                   examples=[schema.TOOL_TEST_REQUEST, schema.TOOL_TEST_RESULT])
    def post(self, request: Request) -> Response:
        """Run a tool-enabled chat with a model and record whether it used its tools well."""
        payload = ToolTestRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        model = data.get("model") or settings.CHATFORGE_DEFAULT_MODEL
        may_record = may_record_validation(request.user)
        if data["record"] and not may_record:
            raise PermissionDenied(
                "Only staff may record a test toward a model's shared validation status; "
                "send record=false or leave it out to test without recording."
            )
        record = may_record if data["record"] is None else data["record"]
        try:
            result = model_test_run(user=request.user, query=data["query"], model=model,
                                    tools=data.get("tools"), timeout_s=data["timeout_s"], record=record)
        except TestTimedOut as exc:
            return Response(
                error_body("timeout", f"The test run did not finish within {data['timeout_s']:g} s; it keeps "
                           f"running (run {exc.run.id}).", {"run_id": str(exc.run.id)}),
                status=status.HTTP_504_GATEWAY_TIMEOUT,
            )
        return Response(result)


class ModelCapabilities(serializers.Serializer):
    tools = serializers.BooleanField()
    streaming = serializers.BooleanField()
    reasoning = serializers.BooleanField()
    verbosity = serializers.BooleanField()
    vision = serializers.BooleanField()


class ModelValidationStatus(serializers.Serializer):
    model = serializers.CharField()
    tests = serializers.IntegerField()
    successes = serializers.IntegerField()
    success_rate = serializers.FloatField()
    validated = serializers.BooleanField()


class ModelEntry(serializers.Serializer):
    id = serializers.CharField()
    provider = serializers.CharField(help_text="The provider's name (\"built-in\" for the demo model).")
    kind = serializers.CharField(help_text="The provider's kind (\"demo\" for the demo model).")
    capabilities = ModelCapabilities()
    validation = ModelValidationStatus()
    available = serializers.BooleanField(help_text="Whether a run of yours with this model can start now.")
    unavailable_reason = serializers.CharField(
        allow_null=True, help_text="Why not, and where to add the missing key; null when available.")


class ModelListResponse(serializers.Serializer):
    default = serializers.CharField(help_text="The model a run uses when it names none.")
    default_available = serializers.BooleanField()
    default_unavailable_reason = serializers.CharField(allow_null=True)
    unavailable_providers = serializers.ListField(
        child=serializers.CharField(), help_text="Providers with a model you cannot use now (no key for you).")
    models = ModelEntry(many=True)


MODEL_LIST_EXAMPLE = OpenApiExample(
    "Models",
    value={
        "default": "demo", "default_available": True, "default_unavailable_reason": None,
        "unavailable_providers": ["anthropic"],
        "models": [
            {"id": "demo", "provider": "built-in", "kind": "demo",
             "capabilities": {"tools": True, "streaming": True, "reasoning": False, "verbosity": False,
                              "vision": False},
             "validation": {"model": "demo", "tests": 0, "successes": 0, "success_rate": 0.0, "validated": False},
             "available": True, "unavailable_reason": None},
            {"id": "claude-sonnet", "provider": "anthropic", "kind": "anthropic",
             "capabilities": {"tools": True, "streaming": True, "reasoning": True, "verbosity": False,
                              "vision": True},
             "validation": {"model": "claude-sonnet", "tests": 0, "successes": 0, "success_rate": 0.0,
                            "validated": False},
             "available": False,
             "unavailable_reason": "No API key for model 'claude-sonnet' of provider 'anthropic': add your own key "
                                   "as 'anthropic_api_key' on the Settings page (Your API keys and secrets), or ask "
                                   "an admin to set the provider's key."},
        ],
    },
    response_only=True,
)


class ModelListView(APIView):
    @extend_schema(responses=ModelListResponse, examples=[MODEL_LIST_EXAMPLE])
    def get(self, request: Request) -> Response:
        """Configured models with capabilities, tool-calling validation status, and whether you can use each
        now (a model whose provider needs a key that neither the server nor you have is listed as unavailable,
        with the reason)."""
        return Response(model_list(user=request.user))
