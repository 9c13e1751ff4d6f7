"""The prompt record: the exact prompt a model was sent (system turn, user text and media in order) and its hash.

Written once, where the prompt is built (evr1-train's row messages, evr1-eval's request), and stored beside what the
model answered (rollout dumps, results rows). Every reader — the viewers, the train -> eval round trip — reads the
record instead of rebuilding the prompt from today's annotations and templates, so what it shows is what was sent;
`from_dict` refuses a record that no longer hashes to the hash written with it. Media are named, never stored: a
video or image part holds its source (a path, or `bytes:<sha256>` for inline bytes). Stdlib only.

>>> rec = PromptRecord((("video", "clip.mp4"), ("text", "What moves?")), system="Be brief.")
>>> rec.text, PromptRecord.from_dict(rec.to_dict()) == rec
('<video>What moves?', True)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PROMPT_SCHEMA", "PromptRecord", "PromptRecordError"]

PROMPT_SCHEMA = "evr1.prompt/1"
_KINDS = ("text", "video", "image")


class PromptRecordError(ValueError):
    """A stored prompt record that is malformed or does not hash to its recorded hash."""


@dataclass(frozen=True, slots=True)
class PromptRecord:
    """The user turn as `(kind, value)` parts in the order sent (text, or a media part naming its source) and the
    system turn. `hash` is the sha256 of the canonical JSON of both: equal hashes, equal prompts."""

    parts: tuple[tuple[str, str], ...]
    system: str | None = None

    def __post_init__(self) -> None:
        parts = tuple((str(kind), str(value)) for kind, value in self.parts)
        bad = sorted({kind for kind, _ in parts if kind not in _KINDS})
        if bad:
            raise PromptRecordError(f"prompt parts of unknown kind {bad}; a part is one of {', '.join(_KINDS)}")
        object.__setattr__(self, "parts", parts)

    @property
    def hash(self) -> str:
        canonical = json.dumps({"system": self.system, "user": self.parts}, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def text(self) -> str:
        """The user text with a `<video>` / `<image>` marker where each medium went."""
        return "".join(value if kind == "text" else f"<{kind}>" for kind, value in self.parts)

    @property
    def media(self) -> tuple[tuple[str, str], ...]:
        """The media parts in the order the model saw them."""
        return tuple(p for p in self.parts if p[0] != "text")

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]]) -> PromptRecord:
        """The record of chat messages in the content-part format (`{"type": "video", "video": path}`, text parts,
        a system message); a medium without a source is named by its position (`video#0`)."""
        system: str | None = None
        parts: list[tuple[str, str]] = []
        for msg in messages:
            content = msg.get("content")
            if msg.get("role") == "system":
                system = content if isinstance(content, str) else json.dumps(content, default=str)
            elif isinstance(content, str):
                parts.append(("text", content))
            elif isinstance(content, list):
                for item in content:
                    parts.append(_part(item if isinstance(item, Mapping) else {"type": "text", "text": str(item)},
                                       len(parts)))  # fmt: skip
        return cls(tuple(parts), system)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PROMPT_SCHEMA, "system": self.system, "parts": [list(p) for p in self.parts],
                "hash": self.hash}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptRecord:
        """Read a stored record; `PromptRecordError` when it is malformed or its content no longer hashes to the
        hash written with it (edited after the run)."""
        if data.get("schema") != PROMPT_SCHEMA:
            raise PromptRecordError(f"prompt record schema {data.get('schema')!r}, expected {PROMPT_SCHEMA!r}")
        parts, system = data.get("parts"), data.get("system")
        if not isinstance(parts, list) or not all(isinstance(p, list) and len(p) == 2 for p in parts):
            raise PromptRecordError("prompt record `parts` must be a list of [kind, value] pairs")
        if system is not None and not isinstance(system, str):
            raise PromptRecordError("prompt record `system` must be a string or null")
        record = cls(tuple((p[0], p[1]) for p in parts), system)
        if data.get("hash") != record.hash:
            raise PromptRecordError(
                f"this prompt does not hash to what the model was sent ({str(data.get('hash'))[:12]}… recorded, "
                f"{record.hash[:12]}… now): the record was edited after the run"
            )
        return record


def _part(item: Mapping[str, Any], index: int) -> tuple[str, str]:
    kind = item.get("type")
    if kind == "text":
        return "text", str(item.get("text", ""))
    if kind not in ("video", "image"):
        raise PromptRecordError(f"message part {index} has type {kind!r}; expected text, video or image")
    source = item.get(kind)
    if isinstance(source, Mapping) and isinstance(source.get("bytes"), bytes):
        return kind, "bytes:" + hashlib.sha256(source["bytes"]).hexdigest()
    if isinstance(source, Mapping):
        source = source.get(kind) or source.get("path")
    return kind, str(source) if isinstance(source, str) and source else f"{kind}#{index}"
