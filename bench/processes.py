"""Processes as the kernel sees them, for the benchmarks that count what a
stack's processes use: who is whose child, and a process with everything
below it (read from /proc, so it works for processes of any user)."""

from __future__ import annotations

import os
from pathlib import Path


def children() -> dict[int, list[int]]:
    """ppid -> pids, for every process now."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def process_tree(pid: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """``pid`` and every process below it (``tree``: a ``children()`` taken already)."""
    tree = children() if tree is None else tree
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo.extend(tree.get(current, []))
    return pids
