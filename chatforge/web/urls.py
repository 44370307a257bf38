"""Routes of the web pages (the browser side of ChatForge)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("c/<uuid:conversation_id>/", views.chat, name="chat-conversation"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("share/<str:token>/", views.share_page, name="share"),
    path("tools/testing/", views.tool_testing, name="tool-testing"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/secrets/", views.secret_save, name="secret-save"),
    path("settings/secrets/<str:name>/delete/", views.secret_delete, name="secret-delete"),
    path("settings/tokens/", views.token_create, name="token-create"),
    path("settings/tokens/<int:token_id>/rotate/", views.token_rotate, name="token-rotate"),
    path("settings/tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
