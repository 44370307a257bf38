"""A conversation's export (``export/``) and its share links (``shares/``):
actions of the conversations view set, kept here so that view set stays
about conversations and messages.

Both read the current branch (``selectors.messages_of``) and its files; the
domain modules (``chatforge.conversations.export`` and ``.shares``) decide
what goes in. Owner only: another user's conversation is not found (404).
"""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from chatforge.conversations import selectors
from chatforge.conversations.export import export_filename, export_json, export_markdown
from chatforge.conversations.models import ConversationShare
from chatforge.conversations.shares import share_create, share_of, share_path, share_revoke, shares_of
from orchestration.services.attachments import attachments_of

from . import schema
from .file_views import content_disposition

EXPORT_FORMATS = ("markdown", "json")


class ShareSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField(help_text="The public, read-only link (no login).")

    class Meta:
        model = ConversationShare
        fields = ["id", "url", "created_at", "revoked_at"]
        read_only_fields = fields

    def get_url(self, share: ConversationShare) -> str:
        return self.context["request"].build_absolute_uri(share_path(share))


SHARE = OpenApiExample(
    "Share link",
    value={"id": "5b0f7c52-6a0e-4d5e-9a57-0c2f3f3b7a10",
           "url": "https://chat.example.com/share/5b0f7c52-6a0e-4d5e-9a57-0c2f3f3b7a10:Wm2u1x…/",
           "created_at": "2026-01-01T10:05:00Z", "revoked_at": None},
    response_only=True,
    status_codes=["201"],
)
EXPORT_FORMAT = OpenApiParameter(
    "format", str, enum=list(EXPORT_FORMATS), default="markdown",
    description="`markdown` (a file to read) or `json` (`{format_version, conversation, messages}`; docs/api.md).",
)


class ConversationSharingMixin:
    """``export/``, ``shares/`` and ``shares/{share_id}/`` of a conversation."""

    def perform_content_negotiation(self, request: Request, force: bool = False):
        # ``?format=markdown`` names the export's format, not one of DRF's renderers.
        return super().perform_content_negotiation(request, force=force or self.action == "export")

    @extend_schema(
        parameters=[EXPORT_FORMAT],
        responses={
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="The current branch as Markdown."),
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="The current branch as "
                                                       "`{format_version, conversation, messages}`."),
            400: dict, 404: dict,
        },
        examples=[schema.NOT_FOUND],
    )
    @action(detail=True, methods=["get"], url_path="export")
    def export(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The conversation's current branch as a download (``Content-Disposition: attachment``)."""
        kind = request.query_params.get("format", "markdown") or "markdown"
        if kind not in EXPORT_FORMATS:
            raise ValidationError({"format": [f"Use one of: {', '.join(EXPORT_FORMATS)}."]})
        conversation = self.get_object()
        messages = selectors.messages_of(conversation)
        options = {"conversation": conversation, "messages": messages, "attachments": attachments_of(messages),
                   "file_url": lambda file_id: request.build_absolute_uri(f"/api/files/{file_id}/content/"),
                   "exported_at": timezone.now()}
        if kind == "json":
            body = json.dumps(export_json(**options), ensure_ascii=False, indent=2)
            response = HttpResponse(body, content_type="application/json; charset=utf-8")
            name = export_filename(conversation, "json")
        else:
            response = HttpResponse(export_markdown(**options), content_type="text/markdown; charset=utf-8")
            name = export_filename(conversation, "md")
        response["Content-Disposition"] = content_disposition(name, inline=False)
        response["Cache-Control"] = "private, no-store"
        return response

    @extend_schema(methods=["get"], responses={200: ShareSerializer(many=True), 404: dict},
                   examples=[schema.NOT_FOUND])
    @extend_schema(methods=["post"], request=None, responses={201: ShareSerializer, 404: dict},
                   examples=[SHARE, schema.NOT_FOUND])
    @action(detail=True, methods=["get", "post"], url_path="shares", pagination_class=None)
    def shares(self, request: Request, pk: str | None = None) -> Response:
        """List the conversation's share links (revoked ones with ``revoked_at``), or make one: a
        snapshot of the current branch, readable by anyone with the link."""
        conversation = self.get_object()
        context = {"request": request}
        if request.method == "GET":
            return Response(ShareSerializer(shares_of(conversation), many=True, context=context).data)
        messages = selectors.messages_of(conversation)
        share = share_create(conversation=conversation, messages=messages, attachments=attachments_of(messages))
        return Response(ShareSerializer(share, context=context).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None, 404: dict}, examples=[schema.NOT_FOUND])
    @action(detail=True, methods=["delete"], url_path=r"shares/(?P<share_id>[^/]+)")
    def share_detail(self, request: Request, pk: str | None = None, share_id: str = "") -> Response:
        """Revoke a share link: from then on it shows "This link was revoked" (404)."""
        share = share_of(self.get_object(), share_id)
        if share is None:
            raise NotFound("No share link of this conversation has this id.")
        share_revoke(share=share)
        return Response(status=status.HTTP_204_NO_CONTENT)
