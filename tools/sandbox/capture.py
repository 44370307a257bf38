"""Keeping what a sandbox prints within bounds: its start and its end.

A traceback is at the end of stderr and a table's header at the start of
stdout, so both ends are kept and the middle of a long stream is replaced
by a line saying how much was left out.
"""

from __future__ import annotations


class Capture:
    """Up to ``keep`` bytes of a stream's start and ``keep`` of its end."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.tail:
            return head
        cut = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        if cut <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        return f"{head}\n[… {cut:,} bytes of output left out …]\n{tail}"
