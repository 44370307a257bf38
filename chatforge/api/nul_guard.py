"""No NUL character from a request's URL or cookies reaches a query.

Postgres text cannot hold NUL (U+0000): psycopg refuses such a parameter
with ``DataError`` before the query is sent, and a view that passed one on
answered 500 - ``POST /api/runs/{id}/tool-calls/%00/decision/`` by the run's
owner, the admin's search and list filters (``?q=%00``), a tool name in the
admin's run page. A session cookie holding an escaped NUL
(``sessionid="\\000…"``, which Django's cookie parser unescapes) failed every
route, signed in or not, with the same 500, and every websocket handshake.

Why one middleware rather than a path converter:

- A converter sees only the path parameters of routes declared with it: not
  query strings, not cookies, not the REST router's regex routes, not the
  admin's ``<path:object_id>`` routes (Django's own), and every route added
  later would have to remember it. This sees the whole decoded path and the
  query string of every HTTP request, before the URL is resolved and before
  authentication, a session or any view reads the database.
- A converter that refuses a value makes the route not match: a 404 "no such
  endpoint", which hides the reason. This answers 400 and says where the NUL
  is - JSON on the API paths (OpenAI's shape on ``/v1``), Django's 400 page
  for the web pages - through the project's 400 view.
- Nothing is lost: no id, name or search text of ChatForge can hold a NUL,
  since none could be stored.

Cookies are not refused but dropped: a cookie holding a NUL was never set
by this site (ours are plain ASCII), so the request goes on as if it had not
been sent - a browser handed a forged cookie still opens the pages, signed
out, instead of failing until the cookie is cleared.

The rule is here, for both faces that apply it: HTTP requests
(``chatforge/web/nul_guard.py``, a middleware) and websocket handshakes,
which do not pass through Django's middleware (``chatforge/realtime/nul_guard.py``:
400 with the JSON error, close code 4400 where the server cannot answer HTTP).

Bodies are checked where they are parsed: JSON by ``chatforge.api.json_input``
(a 400 naming the field), forms by Django's fields (they refuse NUL).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from django.http.cookie import parse_cookie

NUL = "\x00"
_CANNOT_HOLD = "which no ChatForge id, name or text can hold; remove it."


class NulInURL(ValueError):
    """The URL holds a NUL; ``str()`` is the sentence for the client."""


def url_problem(path: str, query_string: str) -> str | None:
    """What is wrong with a URL that holds a NUL (in the decoded path, or in
    a query parameter's name or value), else None. Cheap for every request:
    the query is parsed only when it holds an encoded or raw NUL."""
    if NUL in path:
        return f"The URL's path contains a NUL character (%00), {_CANNOT_HOLD}"
    if "%00" not in query_string and NUL not in query_string:
        return None
    for name, value in parse_qsl(query_string, keep_blank_values=True):
        if NUL in name:
            return f"A query parameter's name contains a NUL character (%00), {_CANNOT_HOLD}"
        if NUL in value:
            shown = name if len(name) <= 40 else name[:40] + "…"
            return f"The query parameter {shown!r} contains a NUL character (%00), {_CANNOT_HOLD}"
    return None


def holds_nul(cookie_header: str) -> bool:
    # Only a raw NUL or a backslash escape (``"\000"``) can decode to one.
    return NUL in cookie_header or "\\" in cookie_header


def without_nul_cookies(cookies: dict[str, str]) -> dict[str, str]:
    """The cookies, less those whose name or value holds a NUL."""
    return {name: value for name, value in cookies.items() if NUL not in name and NUL not in value}


def cookie_header_without_nul(value: bytes) -> bytes:
    """A Cookie header less the cookies that would decode to a NUL (split as
    Django's parser splits it, on ``;``)."""
    kept = [chunk for chunk in value.decode("latin-1").split(";")
            if not any(NUL in k or NUL in v for k, v in parse_cookie(chunk).items())]
    return ";".join(kept).encode("latin-1")
