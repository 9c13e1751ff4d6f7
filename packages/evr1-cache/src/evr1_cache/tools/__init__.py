"""Tools for multi-turn video agents, defined once and used by both engines (trainer rollouts and evaluator).

The model watches a cheap overview, then calls tools to look closer; every tool serves frames from the cache (computed
and cached on first use, then reused), so training and evaluation see the same pixels and timestamps.

- tools: `get_frames(start, end[, fps | n])` (a window at a higher rate), `zoom(time, box)` (a high-resolution
  crop); `register_tool` adds one (`Tool`: name, JSON schema, function), `get_tool`, `tool_names`, `tool_schemas`
- an episode: `ToolSession(video, source, tools, config, budget)` -> `answer(turn_text)` -> `TurnAnswer`
  (`ToolResult`s: text + `ToolMedia` with timestamps, or an error), `EpisodeStats`, `episode_transcript` (for viewers), `with_tool_instructions` (a prompt's system turn); budgets `ToolBudget`,
  sampling `ToolConfig`; a bad call is an error answer, never an exception (`ToolError`)
- frames: `FrameSource`, what tools read frames through: `evr1_cache.MediaLoader(cache_dir, write_cache=True)`
- call syntax: `call_format(family)` -> `CallFormat` (Hermes `<tool_call>` JSON for the Qwen families) with
  `parse` -> `ParsedTurn` (`ToolCall`s, `CallError`s), `render_call`, `response_content`, `system_text`
"""

from __future__ import annotations

from evr1_cache.tools import get_frames as _get_frames  # noqa: F401  (registers the built-in tools)
from evr1_cache.tools import zoom as _zoom  # noqa: F401
from evr1_cache.tools.base import FrameSource, ToolBudget, ToolConfig, ToolContext, ToolError, ToolMedia, ToolResult
from evr1_cache.tools.calls import (
    CALL_FORMATS,
    HERMES,
    CallError,
    CallFormat,
    ParsedTurn,
    ToolCall,
    call_format,
    register_call_format,
)
from evr1_cache.tools.registry import TOOLS, Tool, ToolFn, get_tool, register_tool, tool_names, tool_schemas
from evr1_cache.tools.schema import SchemaError, check_arguments
from evr1_cache.tools.session import (
    DEFAULT_TOOLS,
    EpisodeStats,
    ToolSession,
    TurnAnswer,
    episode_transcript,
    with_tool_instructions,
)

__all__ = [
    "CALL_FORMATS",
    "DEFAULT_TOOLS",
    "HERMES",
    "TOOLS",
    "CallError",
    "CallFormat",
    "EpisodeStats",
    "FrameSource",
    "ParsedTurn",
    "SchemaError",
    "Tool",
    "ToolBudget",
    "ToolCall",
    "ToolConfig",
    "ToolContext",
    "ToolError",
    "ToolFn",
    "ToolMedia",
    "ToolResult",
    "ToolSession",
    "TurnAnswer",
    "call_format",
    "check_arguments",
    "episode_transcript",
    "get_tool",
    "register_call_format",
    "register_tool",
    "tool_names",
    "tool_schemas",
    "with_tool_instructions",
]
