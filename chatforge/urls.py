"""URL routes: health, REST API, OpenAPI, admin, the web pages."""

from django.contrib import admin
from django.urls import include, path

from chatforge.api import health
from chatforge.observability.exposition import metrics_view
from chatforge.realtime.sse import run_events_sse

# The admin's title bar and page titles say whose admin it is.
admin.site.site_header = "ChatForge administration"
admin.site.site_title = "ChatForge admin"
admin.site.index_title = "Tools, models, users and runs"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    # A run's events over SSE: the realtime face's, under the API's prefix.
    path("api/runs/<str:run_id>/events/", run_events_sse, name="run-events"),
    path("api/", include("chatforge.api.urls")),
    path("", include("chatforge.openai_api.urls")),
    path("admin/", admin.site.urls),
    path("", include("chatforge.web.urls")),
]

handler400 = "chatforge.web.errors.bad_request_view"
handler404 = "chatforge.web.errors.not_found_view"
handler500 = "chatforge.web.errors.server_error_view"
