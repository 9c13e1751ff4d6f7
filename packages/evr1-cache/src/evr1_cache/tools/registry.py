"""The tool registry: name -> `Tool` (JSON schema + function), filled by `register_tool`, read by both engines.

Users add a tool the same way the built-in ones are added (see `get_frames.py`): a function
`fn(ctx: ToolContext, args) -> ToolResult` that raises `ToolError` for a bad call, and its schema. The schema is
checked at registration and the arguments against it before `fn` runs, so a tool only sees well-typed values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evr1_cache.registry import registering, unknown_name
from evr1_cache.tools.base import ToolContext, ToolResult
from evr1_cache.tools.schema import check_schema

__all__ = ["TOOLS", "Tool", "ToolFn", "get_tool", "register_tool", "tool_names", "tool_schemas"]

#: A tool's implementation: the episode's context and the schema-checked arguments -> its result.
ToolFn = Callable[[ToolContext, Mapping[str, Any]], ToolResult]


@dataclass(frozen=True)
class Tool:
    """A registered tool: what the model is shown (`name`, `description`, `parameters` JSON schema) and its code."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: ToolFn

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a tool name must be an identifier (what the model writes), got {self.name!r}")
        check_schema(self.parameters, f"tool {self.name!r} parameters")
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: parameters must be a JSON schema of type object")

    def schema(self) -> dict[str, Any]:
        """The function description chat templates take (`tools=[...]`, OpenAI's function format)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


#: Every registered tool by name.
TOOLS: dict[str, Tool] = {}


def register_tool(name: str, description: str, parameters: Mapping[str, Any]) -> Callable[[ToolFn], ToolFn]:
    """Decorator: register `fn` as the tool `name`; a second tool under a taken name is refused."""

    def deco(fn: ToolFn) -> ToolFn:
        registering(TOOLS, name, "tool")(Tool(name, description, parameters, fn))
        return fn

    return deco


def get_tool(name: object) -> Tool:
    """The registered tool `name`; KeyError naming the closest known tools otherwise."""
    tool = TOOLS.get(name) if isinstance(name, str) else None
    if tool is None:
        raise KeyError(unknown_name("tool", name, TOOLS))
    return tool


def tool_names() -> list[str]:
    """Registered tool names, sorted."""
    return sorted(TOOLS)


def tool_schemas(names: Sequence[str]) -> list[dict[str, Any]]:
    """The chat-template function descriptions of `names` (each looked up: a typo fails here, with a suggestion)."""
    return [get_tool(n).schema() for n in names]
