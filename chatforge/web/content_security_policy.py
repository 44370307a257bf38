"""django-csp's middleware without a thread hop per request under ASGI.

``csp.middleware.CSPMiddleware`` is a ``MiddlewareMixin``: under ASGI its
``process_request`` and ``process_response`` would each run in a worker
thread, on every request, API calls included. Both only set attributes and
a header, so they are called inline here; the policy itself is the package's
(``CONTENT_SECURITY_POLICY`` in ``chatforge/settings/security.py``).
"""

from __future__ import annotations

from csp.middleware import CSPMiddleware as _PackageCSPMiddleware
from django.http import HttpRequest, HttpResponseBase


class CSPMiddleware(_PackageCSPMiddleware):
    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        self.process_request(request)
        response = await self.get_response(request)
        return self.process_response(request, response)
