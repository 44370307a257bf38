"""REST endpoints for a user's own secrets: list names, set, delete.

Values go in and never come out: no endpoint returns one, not even to its
owner, so a leaked session or API token cannot read them back.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatforge.accounts.secrets import (
    MAX_SECRET_CHARS,
    check_secret_name,
    user_secret_delete,
    user_secret_names,
    user_secret_set,
)

from .schema import NOT_FOUND, SECRET_NAMES, SECRET_VALUE


# Module-level with distinct names: drf-spectacular names schema components
# after the class, and every view's nested "InputSerializer" would collide.
class SecretNamesOutputSerializer(serializers.Serializer):
    names = serializers.ListField(child=serializers.CharField())


class SecretValueInputSerializer(serializers.Serializer):
    value = serializers.CharField(max_length=MAX_SECRET_CHARS, trim_whitespace=False, allow_blank=False)


class SecretListApi(APIView):
    @extend_schema(operation_id="secrets_list", responses=SecretNamesOutputSerializer, examples=[SECRET_NAMES])
    def get(self, request: Request) -> Response:
        return Response({"names": user_secret_names(user=request.user)})


class SecretDetailApi(APIView):
    @extend_schema(
        examples=[SECRET_VALUE],
        operation_id="secrets_set",
        request=SecretValueInputSerializer,
        responses={204: OpenApiResponse(description="Stored (the value is never returned).")},
    )
    def put(self, request: Request, name: str) -> Response:
        check_secret_name(name)
        payload = SecretValueInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        user_secret_set(user=request.user, name=name, value=payload.validated_data["value"])
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="secrets_delete",
        examples=[NOT_FOUND],
        responses={
            204: OpenApiResponse(description="Deleted."),
            404: OpenApiResponse(response=dict, description="No such secret."),
        },
    )
    def delete(self, request: Request, name: str) -> Response:
        if not user_secret_delete(user=request.user, name=name):
            raise NotFound()
        return Response(status=status.HTTP_204_NO_CONTENT)
