"""Tool calls in a model's own syntax: parse a generated turn into calls, render tool descriptions and answers.

Each model family writes calls the way its chat template teaches it; the Qwen families (Qwen2.5-VL, Qwen3-VL,
Qwen3.5) use the Hermes format: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, answered in a user turn
as `<tool_response>...</tool_response>`. A format is one record here, looked up by family name
(`call_format`); `register_call_format` adds another.

Model output is adversarial: parsing never raises. Every malformed call (unclosed tag, bad JSON, no name, arguments
not an object, too long) becomes a `CallError` the engine answers with an error turn and counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evr1_cache.registry import lookup, registering

__all__ = [
    "CALL_FORMATS",
    "HERMES",
    "CallError",
    "CallFormat",
    "ParsedTurn",
    "ToolCall",
    "call_format",
    "register_call_format",
]

#: A call longer than this (characters between the tags) is refused unparsed: JSON parsing is cheap, not free.
MAX_CALL_CHARS = 4096


@dataclass(frozen=True)
class ToolCall:
    """One well-formed call: the tool's name and its arguments (not yet checked against the tool's schema)."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class CallError:
    """A malformed call: what was wrong (told to the model) and the raw text (for records)."""

    message: str
    raw: str


@dataclass(frozen=True)
class ParsedTurn:
    """A generated turn split into its calls (in order), malformed calls, and the text outside any call."""

    calls: tuple[ToolCall, ...] = ()
    errors: tuple[CallError, ...] = ()
    content: str = ""

    @property
    def wants_tools(self) -> bool:
        """Whether the model asked for a tool (a malformed call counts: it is answered with an error turn)."""
        return bool(self.calls or self.errors)


@dataclass(frozen=True)
class CallFormat:
    """A family's tool-call syntax: the tags around a call and around a tool's answer, and the system text that
    lists the tools. `families` are the model families (evr1_cache.families names) that use it."""

    name: str
    call_open: str
    call_close: str
    response_open: str
    response_close: str
    families: tuple[str, ...] = field(default=())

    def parse(self, text: str) -> ParsedTurn:
        """Split `text` into calls, malformed calls and the remaining content (never raises)."""
        calls: list[ToolCall] = []
        errors: list[CallError] = []
        content: list[str] = []
        rest = text
        while True:
            at = rest.find(self.call_open)
            stray = rest.find(self.call_close)
            if stray != -1 and (at == -1 or stray < at):
                content.append(rest[:stray])
                errors.append(CallError(f"{self.call_close} without {self.call_open}", rest[stray : stray + 80]))
                rest = rest[stray + len(self.call_close) :]
                continue
            if at == -1:
                content.append(rest)
                break
            content.append(rest[:at])
            body_start = at + len(self.call_open)
            end = rest.find(self.call_close, body_start)
            if end == -1:
                errors.append(CallError(f"{self.call_open} is not closed by {self.call_close}", rest[at : at + 200]))
                break
            parsed = self._call(rest[body_start:end])
            if isinstance(parsed, ToolCall):
                calls.append(parsed)
            else:
                errors.append(parsed)
            rest = rest[end + len(self.call_close) :]
        return ParsedTurn(tuple(calls), tuple(errors), "".join(content).strip())

    def _call(self, body: str) -> ToolCall | CallError:
        raw = body.strip()
        if len(raw) > MAX_CALL_CHARS:
            return CallError(f"a tool call longer than {MAX_CALL_CHARS} characters", raw[:200])
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return CallError('a tool call must be JSON: {"name": ..., "arguments": {...}}', raw[:200])
        if not isinstance(data, dict):
            return CallError('a tool call must be a JSON object {"name": ..., "arguments": {...}}', raw[:200])
        name, args = data.get("name"), data.get("arguments", {})
        if isinstance(args, str):  # some models write the arguments as a JSON string
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                return CallError("the call's arguments are not a JSON object", raw[:200])
        if not isinstance(name, str) or not name:
            return CallError('the call has no "name"', raw[:200])
        if not isinstance(args, dict):
            return CallError('the call\'s "arguments" must be a JSON object', raw[:200])
        return ToolCall(name, args)

    def split_turns(self, text: str) -> list[str]:
        """The model turns of a stored trajectory written as one text: a turn ends after its last call (the tools
        answer there), so `"look <call/> closer <call/><call/> <answer>B</answer>"` is three turns. The answers are
        not stored: an engine replaying the turns recomputes them from the cache."""
        turns: list[str] = []
        rest = text
        while True:
            end = rest.find(self.call_close)
            if end == -1:
                break
            cut = end + len(self.call_close)
            while rest[cut:].lstrip().startswith(self.call_open):  # calls written back to back: one turn
                nxt = rest.find(self.call_close, cut)
                if nxt == -1:
                    break
                cut = nxt + len(self.call_close)
            turns.append(rest[:cut])
            rest = rest[cut:]
        if rest.strip() or not turns:
            turns.append(rest.lstrip() if turns else rest)
        return turns

    def render_call(self, call: ToolCall) -> str:
        """The text a model of this format writes for `call` (stored trajectories, scripted policies)."""
        payload = json.dumps({"name": call.name, "arguments": dict(call.arguments)}, separators=(", ", ": "))
        return f"{self.call_open}\n{payload}\n{self.call_close}"

    def response_content(self, results: Sequence[Any]) -> list[dict[str, Any]]:
        """The tools' answers (`ToolResult`s, in call order) as the content items of one chat message: each answer's
        text inside the response tags with its media as `{"type": "image"}` / `{"type": "video"}` items in order
        (the pixels travel beside the messages, as for any prompt). Every engine renders tool turns from this."""
        content: list[dict[str, Any]] = []
        for result in results:
            content.append({"type": "text", "text": f"{self.response_open}\n{result.text}"})
            content += [{"type": media.kind} for media in result.media]
            content.append({"type": "text", "text": f"\n{self.response_close}"})
        return content

    def system_text(self, schemas: Sequence[Mapping[str, Any]]) -> str:
        """The instructions listing the tools, for prompts built without the chat template's `tools=` argument."""
        listing = "\n".join(json.dumps(dict(s), ensure_ascii=False) for s in schemas)
        example = json.dumps({"name": "<tool name>", "arguments": {"<argument>": "<value>"}})
        return (
            "# Tools\n\nYou may call tools to look at the video more closely before you answer.\n\n"
            f"The tools, one JSON description per line, inside <tools></tools>:\n<tools>\n{listing}\n</tools>\n\n"
            f"To call a tool, write a JSON object with its name and arguments inside "
            f"{self.call_open}{self.call_close} tags:\n{self.call_open}\n{example}\n{self.call_close}"
        )


#: Every registered call format by name.
CALL_FORMATS: dict[str, CallFormat] = {}


def register_call_format(fmt: CallFormat) -> CallFormat:
    """Add `fmt` (refused when its name is taken)."""
    return registering(CALL_FORMATS, fmt.name, "tool-call format")(fmt)


HERMES = register_call_format(
    CallFormat(
        "hermes",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        families=("qwen2_5_vl", "qwen3_vl", "qwen3_5"),
    )
)


def call_format(family: str | None) -> CallFormat:
    """The call format of model family `family` (a family name, or a format name); None: Hermes (the Qwen format)."""
    if family is None:
        return HERMES
    aliases = {f: fmt.name for fmt in CALL_FORMATS.values() for f in fmt.families}
    fix = f"known: {', '.join(sorted({*CALL_FORMATS, *aliases}))}; add one with evr1_cache.tools.register_call_format"
    return lookup(CALL_FORMATS, family, "model family for tool calls", aliases=aliases, fix=fix)
