from django.urls import include, path
from rest_framework.routers import DefaultRouter

from .docs_views import ApiDocsView, ApiSchemaView
from .file_views import ConversationFilesView, FileViewSet
from .model_views import ModelListView, ToolTestView
from .secret_views import SecretDetailApi, SecretListApi
from .tool_views import ToolViewSet
from .views import ConversationViewSet, MessageViewSet, RunViewSet


class ApiRouter(DefaultRouter):
    """No format-suffix routes (``messages.json``): every answer is JSON
    already, and DRF's suffix routes passed a ``format`` argument our views do
    not take (500). Both slash spellings: ``trailing_slash.py``."""

    include_format_suffixes = False


router = ApiRouter()
router.register("conversations", ConversationViewSet, basename="conversation")
router.register("runs", RunViewSet, basename="run")
router.register("messages", MessageViewSet, basename="message")
router.register("tools", ToolViewSet, basename="tool")
router.register("files", FileViewSet, basename="file")

urlpatterns = [
    path("schema/", ApiSchemaView.as_view(), name="schema"),
    path("docs/", ApiDocsView.as_view(url_name="schema"), name="docs"),
    path("tools/test/", ToolTestView.as_view(), name="tool-test"),
    path("models/", ModelListView.as_view(), name="models"),
    # Before the router's routes: a conversation's files are a view of the files API.
    path("conversations/<str:conversation_id>/files/", ConversationFilesView.as_view(), name="conversation-files"),
    path("", include(router.urls)),
    path("secrets/", SecretListApi.as_view(), name="secret-list"),
    path("secrets/<str:name>/", SecretDetailApi.as_view(), name="secret-detail"),
]
