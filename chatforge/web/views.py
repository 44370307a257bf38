"""The web pages: chat, settings, tool testing. Thin views; the data comes
from ``chatforge.web.pages`` and the accounts services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from chatforge.accounts.models import ApiToken
from chatforge.accounts.secrets import user_secret_delete, user_secret_set
from chatforge.accounts.tokens import IssuedToken, api_token_create, api_token_revoke, api_token_rotate
from chatforge.conversations import selectors
from chatforge.conversations.shares import share_from_token
from chatforge.errors import InvalidRequest

from .errors import not_found_page
from .forms import SecretForm, TokenCreateForm
from .pages import chat_page_data, settings_page_data, tool_testing_page_data


@require_GET
@login_required
def chat(request: HttpRequest, conversation_id: str | None = None) -> HttpResponse:
    conversation = None
    if conversation_id is not None:
        conversation = selectors.conversations_of(request.user).filter(pk=conversation_id).first()
        if conversation is None:  # deleted, never was, or someone else's
            return not_found_page(request)
    return render(request, "web/chat.html", {"page": chat_page_data(request.user, conversation), "conversation": conversation})


# A shared conversation is for the people given its link, not for search
# engines, and the link (its token) is not passed on to sites it links to.
SHARE_HEADERS = {"X-Robots-Tag": "noindex, nofollow", "Referrer-Policy": "no-referrer"}


@never_cache
@require_GET
def share_page(request: HttpRequest, token: str) -> HttpResponse:
    """A share link (``/share/<token>/``): the snapshot, read-only, with no
    login and nothing of the app but its name. A revoked link says so (404);
    a token that is not one of ours is not found."""
    share = share_from_token(token)
    if share is None:
        response = not_found_page(request)
    elif share.revoked_at is not None:
        response = render(request, "web/share.html", {"revoked": True}, status=404)
    else:
        response = render(request, "web/share.html", {"share": share, "snapshot": share.snapshot})
    for name, value in SHARE_HEADERS.items():
        response[name] = value
    return response


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on pages that link no icon
    (the admin's, a JSON answer): the pages' SVG icon."""
    return HttpResponsePermanentRedirect(static("web/favicon.svg"))


@require_GET
@login_required
def tool_testing(request: HttpRequest) -> HttpResponse:
    return render(request, "web/tool_testing.html", {"page": tool_testing_page_data(request.user)})


def _settings_response(
    request: HttpRequest, *, secret_form: SecretForm | None = None, token_form: TokenCreateForm | None = None,
    issued: IssuedToken | None = None, status: int = 200,
) -> HttpResponse:
    context = {
        **settings_page_data(request.user),
        "secret_form": secret_form or SecretForm(),
        "token_form": token_form or TokenCreateForm(),
        "issued": issued,
    }
    return render(request, "web/settings.html", context, status=status)


@never_cache
@require_GET
@login_required
def settings_page(request: HttpRequest) -> HttpResponse:
    return _settings_response(request)


@require_POST
@login_required
def secret_save(request: HttpRequest) -> HttpResponse:
    form = SecretForm(request.POST)
    if not form.is_valid():
        return _settings_response(request, secret_form=form, status=400)
    try:
        user_secret_set(user=request.user, name=form.cleaned_data["name"], value=form.cleaned_data["value"])
    except InvalidRequest as exc:
        form.add_error(None, exc.message)
        return _settings_response(request, secret_form=form, status=400)
    messages.success(request, f"Saved secret {form.cleaned_data['name']}.")
    return redirect("settings")


@require_POST
@login_required
def secret_delete(request: HttpRequest, name: str) -> HttpResponse:
    try:
        deleted = user_secret_delete(user=request.user, name=name)
    except InvalidRequest as exc:
        messages.error(request, exc.message)
        return redirect("settings")
    if deleted:
        messages.success(request, f"Deleted secret {name}.")
    else:
        messages.error(request, f"You have no secret named {name}.")
    return redirect("settings")


@never_cache
@require_POST
@login_required
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _settings_response(request, token_form=form, status=400)
    # Rendered, not redirected: the plaintext exists only in this response.
    return _settings_response(request, issued=api_token_create(user=request.user, name=form.cleaned_data["name"]))


def _own_live_token(request: HttpRequest, token_id: int) -> ApiToken:
    return get_object_or_404(ApiToken, pk=token_id, user=request.user, revoked_at__isnull=True)


@never_cache
@require_POST
@login_required
def token_rotate(request: HttpRequest, token_id: int) -> HttpResponse:
    return _settings_response(request, issued=api_token_rotate(token=_own_live_token(request, token_id)))


@require_POST
@login_required
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = _own_live_token(request, token_id)
    api_token_revoke(token=token)
    messages.success(request, f"Revoked token {token.name} ({token.prefix}…).")
    return redirect("settings")
