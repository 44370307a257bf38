"""Serializers that are cheap to make, for the requests on the hot path.

For every serializer instance DRF deep-copies each declared field, and
``Field.__deepcopy__`` deep-copies every argument the field was declared
with before building it again. For the message POST that was 0.45 of the
0.6 ms it took to validate a body of one field (most of the web process's
own time before its first statement). The fields declared on a
``LeanSerializer`` are built from literals (strings, numbers, lists of
choices), which nothing mutates, so each instance gets its fields built
again from those same arguments; an argument that is itself a field (a
``ListField``'s ``child``) is still copied deeply, as DRF would, since the
field it is given to binds it.
"""

from __future__ import annotations

import copy
from typing import Any

from rest_framework import serializers
from rest_framework.fields import Field


def _own(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, Field) else value


def rebuilt(field: Field) -> Field:
    """A new field like ``field``, built from the arguments it was declared
    with (DRF keeps them on ``_args`` / ``_kwargs`` for its own copies)."""
    return field.__class__(*(_own(a) for a in field._args), **{k: _own(v) for k, v in field._kwargs.items()})


class LeanSerializer(serializers.Serializer):
    """A plain ``Serializer`` whose fields are rebuilt, not deep-copied.
    Declare fields with literal arguments only."""

    def get_fields(self) -> dict[str, Field]:
        return {name: rebuilt(field) for name, field in self._declared_fields.items()}
