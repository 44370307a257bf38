"""The files API: upload, read, download and delete a file, list a
conversation's files (docs/files.md, "The API").

Every query is scoped to the requesting user: another user's file or
conversation is not found (404), with the same answer as a missing one.

An upload is never held in memory. The ASGI handler has refused a body
over the limit before reading it (``chatforge/serving/request_size.py``);
what it lets through is parsed by Django's multipart parser with the upload
handlers set here: ``CappedUploadHandler`` counts the file's bytes and
stops the parse past CHATFORGE_MAX_FILE_BYTES, and Django's
``TemporaryFileUploadHandler`` writes the file to a temporary file (every
size of it: no file is kept in memory), which ``file_create`` streams to
the files storage.

A download is the stored bytes with headers that keep a browser from doing
anything but save or show them: ``X-Content-Type-Options: nosniff``, a
sandboxing ``Content-Security-Policy``, images (PNG, JPEG, GIF, WebP)
inline with their own type, every other file as an attachment, text as
``text/plain`` (never ``text/html``, whatever it holds), and the name in
``Content-Disposition`` quoted both ways RFC 6266 allows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.core.files import File
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload, TemporaryFileUploadHandler
from django.http import Http404, HttpRequest, StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from chatforge.conversations.selectors import conversation_of
from chatforge.errors import InvalidRequest
from chatforge.files import selectors
from chatforge.files.limits import max_file_bytes, too_large
from chatforge.files.models import StoredFile
from chatforge.files.names import ascii_fallback
from chatforge.files.services import file_create, file_delete
from chatforge.files.sniffing import IMAGE_TYPES
from chatforge.files.storage import file_storage

from . import schema
from .file_serializers import FileSerializer, FileUploadSerializer

UPLOAD_FIELD = "file"
DOWNLOAD_CSP = "sandbox; default-src 'none'"
DOWNLOAD_BLOCK_BYTES = 256 * 1024


class CappedUploadHandler(FileUploadHandler):
    """First in the chain: passes each chunk of an uploaded file on to the
    next handler, and stops the parse as soon as the file passes the limit
    (the view then answers 413). ``connection_reset``: the rest of the body
    is not read, and the parser leaves it alone."""

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.limit = max_file_bytes()
        self.received = 0
        self.exceeded = False

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the temporary file handler's file is the upload


def upload_handlers(request: HttpRequest) -> tuple[CappedUploadHandler, list[FileUploadHandler]]:
    capped = CappedUploadHandler(request)
    return capped, [capped, TemporaryFileUploadHandler(request)]


def content_disposition(name: str, *, inline: bool) -> str:
    """``attachment; filename="report.pdf"; filename*=UTF-8''report.pdf``:
    the plain form for old clients (printable ASCII, no quote or backslash)
    and RFC 5987's percent-encoded UTF-8 for the rest. The name is safe
    already (no CR/LF, no controls: ``names.safe_name``); encoding it makes
    a header that no name can end or extend."""
    disposition = "inline" if inline else "attachment"
    return f"{disposition}; filename=\"{ascii_fallback(name)}\"; filename*=UTF-8''{quote(name, safe='')}"


async def _blocks(handle: File) -> AsyncIterator[bytes]:
    """The file's bytes a block at a time, each read off the event loop.

    An asynchronous iterator, because that is what Django's ASGI handler
    streams: a synchronous one (a ``FileResponse``'s own) it first reads
    whole into a list (Django's ``StreamingHttpResponse.__aiter__``, and
    ``chatforge/web/middleware.py`` for file responses), which for a 64 MiB
    file is 64 MiB in memory."""
    read = sync_to_async(handle.read, thread_sensitive=False)
    try:
        while block := await read(DOWNLOAD_BLOCK_BYTES):
            yield block
    finally:
        await sync_to_async(handle.close, thread_sensitive=False)()


def download_response(file: StoredFile) -> StreamingHttpResponse:
    """The file's bytes, streamed from the storage a block at a time."""
    inline = file.kind == StoredFile.Kind.IMAGE and file.content_type in IMAGE_TYPES
    if inline:
        content_type = file.content_type
    elif file.content_type.startswith("text/"):
        content_type = "text/plain; charset=utf-8"  # HTML, SVG, code: shown as text, never run
    else:
        content_type = file.content_type
    handle = file_storage().open(file.storage_name, "rb")
    response = StreamingHttpResponse(_blocks(handle), content_type=content_type)
    response._resource_closers.append(handle.close)  # a stream never iterated still closes its file
    response["Content-Length"] = str(file.size)
    response["Content-Disposition"] = content_disposition(file.name, inline=inline)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = DOWNLOAD_CSP
    response["Cache-Control"] = "private, no-cache"
    response["ETag"] = f'"{file.sha256}"'
    return response


@extend_schema_view(
    list=extend_schema(summary="Your files, newest first", examples=[schema.FILE]),
    retrieve=extend_schema(responses={200: FileSerializer, 404: dict}, examples=[schema.FILE, schema.NOT_FOUND]),
    destroy=extend_schema(responses={204: None, 404: dict}, examples=[schema.NOT_FOUND]),
)
class FileViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                  viewsets.GenericViewSet):
    """Files: upload (multipart ``file``, optional ``conversation_id``),
    list yours, read one, download its bytes (``content/``), delete."""

    serializer_class = FileSerializer
    parser_classes = [MultiPartParser]

    def initialize_request(self, request: HttpRequest, *args, **kwargs) -> Request:
        # Before anything reads the body (authentication's CSRF check reads the form).
        self.capped, request.upload_handlers = upload_handlers(request)
        return super().initialize_request(request, *args, **kwargs)

    def get_queryset(self):
        return selectors.files_of(self.request.user)

    def get_object(self) -> StoredFile:
        file = selectors.file_of(self.request.user, self.kwargs["pk"])
        if file is None:
            raise Http404("No file matches the given query.")
        return file

    def perform_content_negotiation(self, request: Request, force: bool = False):
        # A download answers with the file's own type, whatever the client accepts.
        return super().perform_content_negotiation(request, force=force or self.action == "content")

    @extend_schema(
        request={"multipart/form-data": FileUploadSerializer},
        responses={201: FileSerializer, 400: dict, 404: dict, 413: dict, 415: dict},
        examples=[schema.FILE, schema.FILE_TOO_LARGE, schema.FILE_QUOTA_EXCEEDED, schema.UNSUPPORTED_FILE_TYPE,
                  schema.NOT_FOUND],
    )
    def create(self, request: Request) -> Response:
        files = request.FILES.getlist(UPLOAD_FIELD)  # parses the body: the handlers above run here
        if self.capped.exceeded:
            raise too_large(limit=self.capped.limit)
        if len(files) != 1:
            raise InvalidRequest(
                f"Send one file in the multipart form field '{UPLOAD_FIELD}' "
                f"(got {len(files) or 'none'}); upload several files one request each.",
                details={"field": UPLOAD_FIELD},
            )
        upload: UploadedFile = files[0]
        conversation = None
        conversation_id = request.data.get("conversation_id")
        if conversation_id:
            conversation = conversation_of(request.user, conversation_id)
            if conversation is None:
                raise Http404("No conversation matches the given query.")
        try:
            file = file_create(user=request.user, source=StoredFile.Source.UPLOAD, name=upload.name or "",
                               content=upload, conversation=conversation)
        finally:
            upload.close()
        return Response(FileSerializer(file).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: StoredFile) -> None:
        file_delete(file=instance)

    @extend_schema(
        responses={(200, "*/*"): OpenApiResponse(description="The file's bytes (images inline, others as an "
                                                             "attachment)."),
                   404: dict},
        examples=[schema.NOT_FOUND],
    )
    @action(detail=True, methods=["get"], url_path="content")
    def content(self, request: Request, pk: str | None = None) -> StreamingHttpResponse:
        return download_response(self.get_object())


@extend_schema(responses={200: FileSerializer(many=True), 404: dict}, examples=[schema.FILE, schema.NOT_FOUND])
class ConversationFilesView(generics.ListAPIView):
    """A conversation's files: uploaded to it, attached to its messages, or
    returned by its tools, in the order they arrived."""

    serializer_class = FileSerializer

    def get_queryset(self):
        conversation = conversation_of(self.request.user, self.kwargs["conversation_id"])
        if conversation is None:
            raise Http404("No conversation matches the given query.")
        return selectors.conversation_files(conversation)
