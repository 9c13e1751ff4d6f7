"""`ToolSession`: one episode's tools over one video — parse a turn, run its calls within the budgets, record it.

Both engines (the trainer's rollouts and the evaluator) drive the same session, so a call is validated, served and
counted the same way in training and evaluation. A bad call never raises: unknown tools, arguments that do not fit
the schema, windows outside the video, calls over a budget and malformed call text are each answered with a short
error the model sees, and counted (`EpisodeStats`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from evr1_cache.errors import CacheMiss, MediaError
from evr1_cache.media import MediaMissError
from evr1_cache.tools.base import FrameSource, ToolBudget, ToolConfig, ToolContext, ToolError, ToolResult
from evr1_cache.tools.calls import CallFormat, ParsedTurn, ToolCall, call_format
from evr1_cache.tools.registry import get_tool, tool_schemas
from evr1_cache.tools.schema import SchemaError, check_arguments

__all__ = ["EpisodeStats", "ToolSession", "TurnAnswer", "episode_transcript"]

logger = logging.getLogger(__name__)

DEFAULT_TOOLS = ("get_frames", "zoom")


@dataclass
class EpisodeStats:
    """Counts of one episode: calls made, served, refused (`invalid`: bad arguments or budget), malformed."""

    turns: int = 0
    calls: int = 0
    served: int = 0
    invalid: int = 0
    malformed: int = 0
    pixels: int = 0
    frames: int = 0


@dataclass(frozen=True)
class TurnAnswer:
    """What a generated turn asked for and what the tools answered (in call order; malformed calls first)."""

    parsed: ParsedTurn
    results: tuple[ToolResult, ...]

    @property
    def final(self) -> bool:
        """The turn asked for no tool: its content is the episode's answer."""
        return not self.parsed.wants_tools

    def record(self) -> dict[str, Any]:
        return {
            "content": self.parsed.content,
            "calls": [r.record() for r in self.results],
            "malformed": [e.message for e in self.parsed.errors],
        }


@dataclass
class ToolSession:
    """Tools of one episode over `video`; `answer(turn_text)` after each generated turn."""

    video: str | os.PathLike[str]
    source: FrameSource
    tools: Sequence[str] = DEFAULT_TOOLS
    config: ToolConfig = field(default_factory=ToolConfig)
    budget: ToolBudget = field(default_factory=ToolBudget)
    family: str | None = None
    stats: EpisodeStats = field(default_factory=EpisodeStats)
    turns: list[TurnAnswer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tools = tuple(get_tool(n).name for n in self.tools)  # a typo fails at set-up, with a suggestion
        self.format: CallFormat = call_format(self.family if self.family is not None else self.config.family)
        self._ctx = ToolContext(
            os.fspath(self.video), self.source, self.config, self.budget, self.budget.pixels_per_episode
        )

    def schemas(self) -> list[dict[str, Any]]:
        """The tools' function descriptions (chat templates' `tools=`)."""
        return tool_schemas(self.tools)

    def system_text(self) -> str:
        """The tool instructions in the family's format (for prompts built as text)."""
        return self.format.system_text(self.schemas())

    def instruct(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with this session's tool instructions (`with_tool_instructions`)."""
        return with_tool_instructions(messages, self.system_text())

    def answer(self, text: str) -> TurnAnswer:
        """Parse one generated turn and run its calls; a turn without calls is final (no results)."""
        parsed = self.format.parse(text)
        self.stats.turns += 1
        results: list[ToolResult] = []
        for err in parsed.errors:
            self.stats.malformed += 1
            results.append(ToolResult("", {}, f"Error: malformed tool call ({err.message}).", error=err.message))
        for i, call in enumerate(parsed.calls):
            if i >= self.budget.calls_per_turn:
                results.append(self._refuse(call, f"at most {self.budget.calls_per_turn} tool calls per turn"))
                continue
            results.append(self.call(call))
        turn = TurnAnswer(parsed, tuple(results))
        self.turns.append(turn)
        return turn

    def call(self, call: ToolCall) -> ToolResult:
        """Run one call within the budgets; every bad call is an error result, never an exception."""
        if self.stats.calls >= self.budget.calls_per_episode:
            return self._refuse(
                call, f"the episode's {self.budget.calls_per_episode} tool calls are used up; answer now"
            )
        self.stats.calls += 1
        if call.name not in self.tools:
            return self._refuse(call, f"unknown tool {call.name!r}; available: {', '.join(self.tools)}", counted=True)
        tool = get_tool(call.name)
        try:
            check_arguments(tool.parameters, call.arguments)
            result = tool.fn(self._ctx, call.arguments)
        except (ToolError, SchemaError) as exc:
            return self._refuse(call, str(exc), counted=True)
        except (MediaError, CacheMiss, MediaMissError) as exc:  # the video is unreadable: the model cannot fix it
            logger.warning("tool %s on %s: %s", call.name, self.video, exc)
            return self._refuse(call, "the video cannot be read for this tool", counted=True)
        if result.pixels > self._ctx.pixels_left:  # a user tool that did not charge its own output
            return self._refuse(call, f"the output exceeds the {self._ctx.pixels_left} pixels left", counted=True)
        self._ctx.pixels_left -= result.pixels
        self.stats.served += 1
        self.stats.pixels += result.pixels
        self.stats.frames += sum(len(m.timestamps) for m in result.media)
        return result

    def _refuse(self, call: ToolCall, message: str, *, counted: bool = False) -> ToolResult:
        self.stats.invalid += 1
        if not counted:
            self.stats.calls += 1
        return ToolResult(call.name, dict(call.arguments), f"Error: {message}.", error=message)

    def record(self) -> dict[str, Any]:
        """Every turn (calls, arguments, returned frame timestamps, errors) and the counts, JSON-ready."""
        return {"turns": [t.record() for t in self.turns], "stats": asdict(self.stats)}


def with_tool_instructions(messages: Sequence[Mapping[str, Any]], text: str) -> list[dict[str, Any]]:
    """`messages` with the tool instructions `text` in the system turn (added first, or appended to a string system
    turn): templates that render `tools=` themselves (Qwen3-VL) and ones that do not (Qwen2.5-VL) get the same."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content']}\n\n{text}"
    else:
        out.insert(0, {"role": "system", "content": text})
    return out


def episode_transcript(record: Mapping[str, Any]) -> str:
    """A readable transcript of `ToolSession.record()` for viewers: each turn's text (when recorded as `said`), its
    calls with arguments, the returned frames' timestamps or the error, then the counts."""
    lines: list[str] = []
    for i, turn in enumerate(record.get("turns") or [], 1):
        said = turn.get("said", turn.get("content", ""))
        lines.append(f"[turn {i}] {said}".rstrip())
        lines += [f"  ! malformed call: {err}" for err in turn.get("malformed") or []]
        for call in turn.get("calls") or []:
            if not call.get("name"):
                continue
            args = ", ".join(f"{k}={v}" for k, v in (call.get("arguments") or {}).items())
            if call.get("ok"):
                shown = "; ".join(
                    f"{m.get('kind')} at " + ", ".join(f"{t:.2f}" for t in m.get("timestamps") or []) + " s"
                    for m in call.get("media") or []
                )
                lines.append(f"  -> {call['name']}({args}): {shown or call.get('text', '')}")
            else:
                lines.append(f"  -> {call['name']}({args}): error: {call.get('error')}")
    stats = record.get("stats") or {}
    if stats:
        lines.append("[tools] " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    return "\n".join(lines)
