"""Where a client resumes a run's events: ``?after=N`` or ``Last-Event-ID``.

An event seq is a positive 64-bit number in the event log. A value beyond it
(``18446744073709551616``) reached Redis and broke the stream after its
headers (SSE) or closed the socket with 1011, so it is checked first and
refused with a message that says what is allowed.
"""

from __future__ import annotations

MAX_SEQ = 2**63 - 1


def parse_resume_point(raw: str | None, *, source: str) -> int | None:
    """The seq to resume after, None when not given; ``ValueError`` with a
    sentence for the client when it is not a seq."""
    if raw is None or raw == "":
        return None
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > len(str(MAX_SEQ)) or int(text) > MAX_SEQ:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise ValueError(
            f"The {source} must be an event seq, a whole number from 0 to {MAX_SEQ}; got {shown!r}."
        )
    return int(text)
