"""The OpenAPI schema and the Swagger UI, and who may read them.

In development both are public (the quickest way to learn the API). In
production the schema names every route and parameter, which is a map for an
attacker and of no use to someone without an account: it is served to signed-in
users and token holders only, unless ``CHATFORGE_PUBLIC_API_DOCS`` says
otherwise (default: ``DJANGO_DEBUG``).

The Swagger UI is the "split" variant: its start-up script is a separate file,
not an inline ``<script>``, so the page works under our Content-Security-Policy;
its one inline ``<style>`` carries the request's nonce (our template).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response


class MayReadApiDocs(BasePermission):
    message = ("Sign in (or send an API token) to read the API schema and docs; "
               "the operator can make them public with CHATFORGE_PUBLIC_API_DOCS=true.")

    def has_permission(self, request: Request, view) -> bool:
        if settings.CHATFORGE_PUBLIC_API_DOCS:
            return True
        return bool(request.user and request.user.is_authenticated)


class ApiDocsAccessMixin:
    """Who may read (``MayReadApiDocs``), a refusal that says how to get in,
    and errors as the API's JSON envelope: these views' own renderers (YAML,
    an HTML template) would otherwise render the error in their format."""

    permission_classes = [MayReadApiDocs]

    def permission_denied(self, request: Request, message: str | None = None, code: str | None = None) -> None:
        raise NotAuthenticated(MayReadApiDocs.message)

    def finalize_response(self, request: Request, response, *args, **kwargs):
        if isinstance(response, Response) and response.exception:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class ApiSchemaView(ApiDocsAccessMixin, SpectacularAPIView):
    """``/api/schema/``: the OpenAPI document (YAML, or JSON when asked)."""


class ApiDocsView(ApiDocsAccessMixin, SpectacularSwaggerSplitView):
    """``/api/docs/``: Swagger UI over the schema."""

    template_name = "api/swagger_ui.html"
