"""Routes of the accounts API, included under ``/api/`` by ``chatforge.api.urls``."""

from django.urls import path

from .api import SecretDetailApi, SecretListApi

urlpatterns = [
    path("secrets/", SecretListApi.as_view(), name="secret-list"),
    path("secrets/<str:name>/", SecretDetailApi.as_view(), name="secret-detail"),
]
