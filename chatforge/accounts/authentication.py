"""DRF authentication by ``Authorization: Bearer <ChatForge API token>``."""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .auth_failures import TooManyFailures, client_of_request
from .tokens import authenticate_token
from chatforge.observability.log_context import bind_user


class AuthenticationThrottled(exceptions.Throttled):
    """429 for a client that failed authentication too often. It carries its
    own sentence: the API's error handler would otherwise speak of messages."""

    def __init__(self, failure: TooManyFailures) -> None:
        super().__init__(wait=failure.retry_after_s, detail=str(failure))
        self.message = str(failure)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        token = token.strip()
        if not token:
            raise exceptions.AuthenticationFailed("The Authorization header has no token after 'Bearer'.")
        try:
            user = authenticate_token(token, client=client_of_request(request))
        except TooManyFailures as exc:
            raise AuthenticationThrottled(exc) from None
        if user is None:
            raise exceptions.AuthenticationFailed(
                "The API token is invalid or revoked. Create a new one in your settings."
            )
        bind_user(user.pk)  # the request's log lines say whose it is
        return (user, token)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
