"""List pagination with bounds, so no query string can reach the database
as an out-of-range LIMIT or OFFSET (a 500 before: Postgres' bigint)."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_PAGE_SIZE = 200
# Past this no list has rows: answer an empty page instead of overflowing.
MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=`` (default 50) is capped at 200; ``?offset=`` beyond any
    real list gives an empty page. Bad values fall back to the defaults, as
    DRF's own pagination does."""

    max_limit = MAX_PAGE_SIZE

    def get_offset(self, request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
