from __future__ import annotations

import sys
import types

import pytest

from tools.builtin import BUILTIN_TOOLS
from tools.executor import execute_tool
from tools.registry import DuplicateToolError, ToolConfigurationError, ToolRegistry, build_registry
from tests.tools.factories import make_tool, registry_of


def test_register_returns_the_tool_and_get_finds_it() -> None:
    registry = ToolRegistry()
    tool = make_tool(name="alpha")

    assert registry.register(tool) is tool
    assert registry.get("alpha") is tool
    assert registry.get("missing") is None
    assert "alpha" in registry and len(registry) == 1


def test_duplicate_names_are_refused_with_a_clear_message() -> None:
    registry = registry_of(make_tool(name="alpha"))

    with pytest.raises(DuplicateToolError, match="'alpha' is already registered"):
        registry.register(make_tool(name="alpha"))
    assert len(registry) == 1


def test_only_tools_can_be_registered() -> None:
    with pytest.raises(TypeError, match="Only Tool instances"):
        ToolRegistry().register({"name": "x"})  # type: ignore[arg-type]


def test_names_and_all_are_sorted() -> None:
    registry = registry_of(make_tool(name="charlie"), make_tool(name="alpha"), make_tool(name="bravo"))

    assert registry.names() == ["alpha", "bravo", "charlie"]
    assert [tool.name for tool in registry.all()] == ["alpha", "bravo", "charlie"]


def test_specs_of_all_tools() -> None:
    registry = registry_of(make_tool(name="bravo"), make_tool(name="alpha"))

    assert [spec["function"]["name"] for spec in registry.specs()] == ["alpha", "bravo"]
    assert all(spec["type"] == "function" for spec in registry.specs())


def test_specs_of_named_tools_keep_the_requested_order_without_duplicates() -> None:
    registry = registry_of(make_tool(name="alpha"), make_tool(name="bravo"), make_tool(name="charlie"))

    specs = registry.specs(["charlie", "alpha", "charlie"])

    assert [spec["function"]["name"] for spec in specs] == ["charlie", "alpha"]


def test_specs_with_an_unknown_name_names_it_and_the_available_tools() -> None:
    registry = registry_of(make_tool(name="alpha"), make_tool(name="bravo"))

    with pytest.raises(KeyError, match=r"Unknown tool 'nope'; available tools: alpha, bravo"):
        registry.specs(["alpha", "nope"])


def test_build_registry_has_the_builtins() -> None:
    registry = build_registry()

    assert registry.names() == sorted(tool.name for tool in BUILTIN_TOOLS)
    assert registry.names() == ["calculator", "echo", "get_time", "list_files", "python", "read_file", "web_fetch",
                                "web_search"]


def test_build_registry_loads_tools_from_extra_modules() -> None:
    registry = build_registry(["tests.tools.plugin_tools"])

    assert registry.names() == ["calculator", "echo", "get_time", "list_files", "python", "read_file", "shout", "web_fetch",
                                "web_search"]
    assert execute_tool(registry, "shout", {"text": "hi"}).result == "HI"


def test_extra_module_clashing_with_a_builtin_is_refused() -> None:
    with pytest.raises(DuplicateToolError, match="'echo' is already registered"):
        build_registry(["tests.tools.plugin_duplicate_tools"])


def test_extra_module_without_tools_list_is_refused() -> None:
    with pytest.raises(ToolConfigurationError, match="must define TOOLS"):
        build_registry(["tests.tools.plugin_without_tools"])


def test_extra_module_with_something_else_than_tools_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fake_tool_module")
    module.TOOLS = [make_tool(name="fine"), "not a tool"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_tool_module", module)

    with pytest.raises(ToolConfigurationError, match=r"TOOLS\[1\] is a str, not a Tool"):
        build_registry(["fake_tool_module"])


def test_missing_extra_module_fails_loudly() -> None:
    with pytest.raises(ModuleNotFoundError):
        build_registry(["tests.tools.does_not_exist"])


def test_extra_modules_as_a_single_string_is_refused() -> None:
    with pytest.raises(TypeError, match="not a string"):
        build_registry("tests.tools.plugin_tools")
