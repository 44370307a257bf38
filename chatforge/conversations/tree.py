"""The messages of a conversation as a tree (decision 0037): each message
names its parent, an edit or a regenerated answer is a sibling of what it
replaces, and what a person sees — and a model is given — is one path
through it.

Plain functions over the rows, no queries: the callers read the rows once
(the model turn's history, the POST that must find where a new message
goes, the API's listings) and ask these for the path they need. A node is
anything with ``pk``, ``parent_id``, ``role`` and ``created_at`` (a
``Message``, or a ``Node`` read without the message's text).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar
from uuid import UUID


class TreeNode(Protocol):
    pk: Any
    parent_id: Any
    role: str
    created_at: datetime


class Node(NamedTuple):
    """A message's place in the tree, without its text."""

    pk: UUID
    parent_id: UUID | None
    role: str
    created_at: Any  # a datetime (text on SQLite: compared only with its own kind)


N = TypeVar("N", bound=TreeNode)


def _order(node: TreeNode) -> tuple:
    """Older first; ties by id, as the database orders ``(created_at, id)``."""
    return (node.created_at, node.pk)


def in_tree_order(nodes: Iterable[N]) -> list[N]:
    """Every message, by ``(created_at, id)``."""
    return sorted(nodes, key=_order)


def children_of(nodes: Iterable[N]) -> dict[Any, list[N]]:
    """Each message's children, oldest first (roots under ``None``; a
    message whose parent is not among ``nodes`` counts as a root)."""
    nodes = list(nodes)
    known = {node.pk for node in nodes}
    children: dict[Any, list[N]] = defaultdict(list)
    for node in in_tree_order(nodes):
        children[node.parent_id if node.parent_id in known else None].append(node)
    return children


def path_to(nodes: Iterable[N], message_id: Any) -> list[N]:
    """The root-to-message path ending at ``message_id`` (itself included);
    empty when it is not among ``nodes``. What a run's model is given."""
    by_id = {node.pk: node for node in nodes}
    path: list[N] = []
    seen: set = set()
    node = by_id.get(message_id)
    while node is not None and node.pk not in seen:
        seen.add(node.pk)
        path.append(node)
        node = by_id.get(node.parent_id)
    path.reverse()
    return path


def branch_through(nodes: Iterable[N], leaf_id: Any) -> list[N]:
    """The branch through ``leaf_id``: the path from the root to it, then on
    down by the newest child at each step. A leaf that is not among
    ``nodes`` (unset, or deleted) gives the newest root's branch."""
    nodes = list(nodes)
    children = children_of(nodes)
    path = path_to(nodes, leaf_id) if leaf_id is not None else []
    if not path:
        roots = children.get(None) or []
        if not roots:
            return []
        path = [roots[-1]]
    seen = {node.pk for node in path}
    while children.get(path[-1].pk):
        newest = children[path[-1].pk][-1]
        if newest.pk in seen:
            break
        seen.add(newest.pk)
        path.append(newest)
    return path


def sibling_ids(nodes: Sequence[N]) -> dict[Any, list[Any]]:
    """For each message, the ids of the messages with the same parent and
    the same role, by ``(created_at, id)``, itself included: the versions a
    person can switch between."""
    groups: dict[tuple, list[Any]] = defaultdict(list)
    known = {node.pk for node in nodes}
    for node in in_tree_order(nodes):
        groups[(node.parent_id if node.parent_id in known else None, node.role)].append(node.pk)
    return {node.pk: groups[(node.parent_id if node.parent_id in known else None, node.role)] for node in nodes}


def subtree_ids(nodes: Iterable[N], message_id: Any) -> list[Any]:
    """``message_id`` and every message below it."""
    children = children_of(nodes)
    found: list[Any] = []
    stack = [message_id]
    seen: set = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        found.append(current)
        stack.extend(child.pk for child in children.get(current, ()))
    return found
