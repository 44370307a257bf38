"""``LeanSerializer`` builds each instance's fields from their declared
arguments instead of deep copies: the same fields, validating the same way,
none shared between instances."""

from __future__ import annotations

import copy

import pytest
from rest_framework import serializers

from chatforge.api.lean_serializers import LeanSerializer
from chatforge.api.serializers import MessageCreateSerializer


def deep_copied_fields(serializer: serializers.Serializer) -> dict:
    """What DRF's own ``Serializer.get_fields`` returns."""
    return copy.deepcopy(serializer._declared_fields)


def test_the_fields_are_those_drf_would_make():
    lean = MessageCreateSerializer()
    assert {name: repr(f) for name, f in lean.get_fields().items()} == {
        name: repr(f) for name, f in deep_copied_fields(lean).items()}


def test_no_field_is_shared_between_instances():
    first, second = MessageCreateSerializer(), MessageCreateSerializer()
    for name, field in first.fields.items():
        assert field is not second.fields[name]
        assert field.parent is first
    assert first.fields["tools"].child is not second.fields["tools"].child
    assert first.fields["tools"].child.parent is first.fields["tools"]


@pytest.mark.parametrize("body", [
    {"content": "hello"},
    {"content": "hi", "tools": ["calculator", "echo"], "reasoning_effort": "low", "max_iterations": 3,
     "on_active": "enqueue", "model": "demo", "assistant": "helper"},
    {"content": "", "tools": ["x" * 65], "reasoning_effort": "huge", "max_iterations": -1, "replace_from": "no",
     "on_active": "later"},
    {"tools": None},
    {"content": 5, "tools": "calculator"},
])
def test_validation_is_drfs(body):
    class DeepCopied(MessageCreateSerializer):
        def get_fields(self):
            return serializers.Serializer.get_fields(self)

    lean, plain = MessageCreateSerializer(data=body), DeepCopied(data=body)
    assert lean.is_valid() == plain.is_valid()
    assert lean.errors == plain.errors
    if not lean.errors:
        assert lean.validated_data == plain.validated_data


def test_a_serializer_of_literal_fields_only():
    class Point(LeanSerializer):
        x = serializers.IntegerField(min_value=0)
        tags = serializers.ListField(child=serializers.ChoiceField(choices=["a", "b"]), required=False)

    assert Point(data={"x": 1, "tags": ["a"]}).is_valid()
    bad = Point(data={"x": -1, "tags": ["c"]})
    assert not bad.is_valid() and set(bad.errors) == {"x", "tags"}
