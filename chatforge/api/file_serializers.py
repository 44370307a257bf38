"""The shapes of files in the REST API (docs/files.md, "The API")."""

from __future__ import annotations

from rest_framework import serializers

from chatforge.files.models import StoredFile
from chatforge.files.text import text_state


class FileSerializer(serializers.ModelSerializer):
    """A file as every route shows it: its metadata and where its bytes are."""

    conversation_id = serializers.UUIDField(read_only=True, allow_null=True)
    message_id = serializers.UUIDField(read_only=True, allow_null=True)
    content_url = serializers.SerializerMethodField()

    class Meta:
        model = StoredFile
        fields = ["id", "name", "content_type", "kind", "size", "sha256", "created_at", "conversation_id",
                  "message_id", "source", "text_status", "text_error", "content_url"]
        read_only_fields = fields

    def get_content_url(self, file: StoredFile) -> str:
        return f"/api/files/{file.id}/content/"

    def to_representation(self, file: StoredFile) -> dict:
        data = super().to_representation(file)
        # A reading lost long ago shows as failed (chatforge/files/text.py, text_state).
        state = text_state(file)
        data["text_status"], data["text_error"] = state.status, state.error
        return data


class FileUploadSerializer(serializers.Serializer):
    """The upload form (``POST /api/files/``, multipart): described for the
    schema; the view reads the parts itself, so the file is never read
    twice."""

    file = serializers.FileField(help_text="The file. Its type is read from its contents, not its name.")
    conversation_id = serializers.UUIDField(
        required=False, help_text="A conversation of yours to file it under (it is listed with its files)."
    )
