"""The shapes of files in the REST API (docs/files.md, "The API")."""

from __future__ import annotations

from rest_framework import serializers

from chatforge.files.models import StoredFile


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
