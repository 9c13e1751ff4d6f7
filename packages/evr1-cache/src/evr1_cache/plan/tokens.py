"""Exact prompt lengths per dataset row: the family's vision-token formula + the tokenizer's count of the rendered text.

Why a planner: a long video expands past `max_prompt_length` only when its frames are sampled, which in verl happens
inside a rollout worker hours into a run ("Prompt length exceeds ..."). The number of vision placeholders follows
from the video's length, fps and size alone (`ModelFamily.video_tokens`), so every row can be measured up front
without decoding a frame: from the `VideoMeta` that `evr1-cache build` wrote into the row, or from a packet probe.

The text side is exact when a tokenizer (a loaded processor, or a local checkpoint folder) is given: the chat template
is rendered, every placeholder is expanded as the processor expands it (`ModelFamily.expand_prompt`, timestamps
included), and the result is tokenized -- the processor's own `input_ids` length (checked against it in
`test_plan_parity.py`). Without a tokenizer the text is bounded by its UTF-8 byte count plus a template allowance
(byte-level BPE never yields more tokens than bytes), and the plan says it is a bound.

Names (stable): MediaPlan, RowPlan, plan_rows(rows, family, video_spec, image_spec, ...), row_media(...),
default_messages(row, prompt_key), TextCounter, HFTextCounter, load_text_counter(path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from evr1_cache.build import IMAGE_KEYS, VIDEO_KEYS, media_of
from evr1_cache.dataset import cache_refs, row_id
from evr1_cache.errors import MediaError
from evr1_cache.families import ModelFamily, get_family
from evr1_cache.paths import MediaPaths
from evr1_cache.plan.row_spec import row_video_spec
from evr1_cache.spec import ImageSpec, SamplingSpec

__all__ = [
    "TEMPLATE_ALLOWANCE",
    "HFTextCounter",
    "MediaPlan",
    "RowPlan",
    "TextCounter",
    "default_messages",
    "load_text_counter",
    "plan_row",
    "plan_rows",
    "row_media",
]

#: Tokens allowed for the chat template's own text (role headers, generation prompt) when no tokenizer is given.
TEMPLATE_ALLOWANCE = 64
_PLACEHOLDER = re.compile(r"(<video>|<image>)")


@dataclass(frozen=True)
class MediaPlan:
    """One video or image of a row as the model will see it: sampled frames, resized size, vision placeholders.

    `source` says where the geometry came from: "cache" (the row's VideoMeta, same spec), "meta" (the row's VideoMeta
    re-planned for another spec), "probe" (the file's header) or "error" (then `error` says why)."""

    kind: str  # "video" | "image"
    path: str
    tokens: int = 0
    nframes: int = 0
    height: int = 0
    width: int = 0
    frames_indices: tuple[int, ...] = ()
    fps: float = 0.0
    total_num_frames: int = 0
    source: str = "probe"
    error: str | None = None
    #: the untouched source geometry (for re-planning with a smaller budget): (total frames, fps, height, width)
    native: tuple[int, float, int, int] | None = None

    def meta(self) -> dict[str, Any]:
        """The `VideoMeta.to_hf()`-style mapping the family's prompt rules read."""
        return {
            "frames_indices": list(self.frames_indices),
            "fps": self.fps,
            "total_num_frames": self.total_num_frames,
        }


@dataclass(frozen=True)
class RowPlan:
    """One row's prompt length: `total = text + vision` (`exact` False when the text side is a bound)."""

    index: int
    row_id: str
    total: int
    text: int
    vision: int
    exact: bool
    media: tuple[MediaPlan, ...] = field(default=())
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def over(self, limit: int | None) -> bool:
        return limit is not None and self.ok and self.total > limit


class TextCounter(Protocol):
    """Renders a chat and counts its tokens after the family's placeholder expansion."""

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str: ...

    def count(self, text: str) -> int: ...


class HFTextCounter:
    """A transformers processor's (or tokenizer's) chat template + tokenizer. Loaded objects only: nothing downloads."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        text = self.processor.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return str(text)

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def load_text_counter(path: str | os.PathLike[str]) -> HFTextCounter:
    """The processor (else the tokenizer) of a local checkpoint folder, offline. Imports transformers lazily."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"tokenizer folder {folder} not found: give a local checkpoint or tokenizer folder (nothing is downloaded)"
        )
    try:
        from transformers import AutoProcessor, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(f"exact text counts need transformers ({exc}); pip install transformers") from exc
    try:
        loaded: Any = AutoProcessor.from_pretrained(str(folder), local_files_only=True)
    except Exception:
        loaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    if (
        getattr(loaded, "chat_template", None) is None
        and getattr(getattr(loaded, "tokenizer", None), "chat_template", None) is None
    ):
        raise ValueError(f"{folder}: the tokenizer has no chat template; the prompt cannot be rendered as trained")
    return HFTextCounter(loaded)


def default_messages(row: Mapping[str, Any], prompt_key: str = "problem") -> list[dict[str, Any]]:
    """The user turn of a row: its question with `<video>` / `<image>` placeholders as media items (missing ones
    prepended, one per media item, as evr1-train does). A verl-style `prompt` list of messages is used as it is.

    evr1-train adds its own lead-in and answer format; its start-up check passes its exact messages instead."""
    prompt = row.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(m, Mapping) for m in prompt):
        return [dict(m) for m in prompt]
    text = row.get(prompt_key)
    if not isinstance(text, str):
        raise ValueError(f"row has no string {prompt_key!r} column (the question); set --prompt-key")
    n_video, n_image = len(media_of(dict(row), VIDEO_KEYS)), len(media_of(dict(row), IMAGE_KEYS))
    found = _PLACEHOLDER.findall(text)
    text = (
        "<video>" * max(0, n_video - found.count("<video>"))
        + "<image>" * max(0, n_image - found.count("<image>"))
        + text
    )
    parts = [part for part in _PLACEHOLDER.split(text) if part]
    content = [{"type": p[1:-1]} if p in ("<video>", "<image>") else {"type": "text", "text": p} for p in parts]
    return [{"role": "user", "content": content}]


def _meta_of(ref: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    meta = ref.get("meta") if ref else None
    if isinstance(meta, str):
        import json

        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    return meta if isinstance(meta, Mapping) else None


def plan_video(path: str, family: ModelFamily, spec: SamplingSpec, meta: Mapping[str, Any] | None = None) -> MediaPlan:
    """A video's frames, size and placeholder count under `spec`: from its cached `VideoMeta` (no I/O) or a probe."""
    source = "probe"
    try:
        if meta is not None and meta.get("total_num_frames") and meta.get("fps") and meta.get("width"):
            total, fps = int(meta["total_num_frames"]), float(meta["fps"])
            height, width = int(meta["height"]), int(meta["width"])
            if meta.get("spec_key") == spec.key() and meta.get("frames_indices") is not None:
                indices = tuple(int(i) for i in meta["frames_indices"])
                h, w = int(meta["resized_height"]), int(meta["resized_width"])
                source = "cache"
            else:
                indices = tuple(family.sample_frame_indices(total, fps, spec))
                h, w = family.resized_hw(height, width, len(indices), spec)
                source = "meta"
        else:
            from evr1_cache.decode import plan
            from evr1_cache.probing import probe

            info = probe(path)
            total, fps, height, width = info.total_num_frames, info.fps, info.height, info.width
            indices, h, w = plan(info, spec)
        tokens = family.video_tokens(len(indices), h, w)
    except Exception as exc:  # a bad video is a row error, never a crash of the plan
        return MediaPlan("video", path, source="error", error=f"{type(exc).__name__}: {exc}")
    return MediaPlan(
        "video", path, tokens, len(indices), h, w, indices, fps, total, source, native=(total, fps, height, width)
    )


def plan_image(
    path: str, family: ModelFamily, spec: ImageSpec, meta: Mapping[str, Any] | None = None, cached: bool = False
) -> MediaPlan:
    """An image's resized size and placeholder count: from the cached entry's size or the file's header."""
    try:
        if cached and meta is not None and meta.get("height") and meta.get("width"):
            h, w, source = int(meta["height"]), int(meta["width"]), "cache"
            native = (1, 0.0, h, w)
        else:
            from PIL import Image

            with Image.open(path) as img:
                width, height = img.size
            h, w = family.resized_image_hw(height, width, spec)
            source, native = "probe", (1, 0.0, height, width)
        tokens = family.image_tokens(h, w, spec)
    except Exception as exc:
        return MediaPlan("image", path, source="error", error=f"{type(exc).__name__}: {exc}")
    return MediaPlan("image", path, tokens, 1, h, w, source=source, native=native)


def row_media(
    row: Mapping[str, Any],
    family: ModelFamily,
    spec: SamplingSpec,
    image_spec: ImageSpec,
    *,
    data_file: str | os.PathLike[str] | None = None,
    media_root: str | os.PathLike[str] | None = None,
    allow_outside_media: bool = False,
    allow_remote_media: Iterable[str] = (),
) -> tuple[list[MediaPlan], list[MediaPlan]]:
    """(videos, images) of a row in order, planned under the specs (the row's `video_cache` metadata when present);
    a file that must be probed is read only inside the dataset's folder or `media_root` (`MediaPaths`)."""
    base = Path(data_file) if data_file is not None else Path("row.jsonl")
    rule = MediaPaths.for_dataset(base, media_root, allow_outside=allow_outside_media, allow_remote=allow_remote_media)
    anywhere = replace(rule, root=None)  # a row's recorded metadata is planned without reading its file
    videos = [anywhere.resolve(m) for m in media_of(dict(row), VIDEO_KEYS)]
    images = [anywhere.resolve(m) for m in media_of(dict(row), IMAGE_KEYS)]
    vrefs, irefs = cache_refs(row, "video", len(videos)), cache_refs(row, "image", len(images))
    vplans = [
        _refused(rule, "video", p, _meta_of(r)) or plan_video(p, family, spec, _meta_of(r))
        for p, r in zip(videos, vrefs, strict=True)
    ]
    iplans = [
        _refused(rule, "image", p, _meta_of(r))
        or plan_image(
            p, family, image_spec, _meta_of(r), bool(r and f"/{image_spec.key()}/" in f"/{r.get('file', '')}")
        )
        for p, r in zip(images, irefs, strict=True)
    ]
    return vplans, iplans


def _refused(rule: MediaPaths, kind: str, path: str, meta: Mapping[str, Any] | None) -> MediaPlan | None:
    """An error plan when `path` would have to be read (no recorded metadata) but lies outside `rule`'s folder."""
    if meta is not None:
        return None
    try:
        rule.resolve(path)
    except MediaError as exc:
        return MediaPlan(kind, path, source="error", error=str(exc))
    return None


def _text_parts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [str(c.get("text", "")) for c in content if isinstance(c, Mapping) and c.get("type") == "text"]
    return out


def plan_row(
    index: int,
    row: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    videos: Sequence[MediaPlan],
    images: Sequence[MediaPlan],
    family: ModelFamily,
    image_spec: ImageSpec,
    counter: TextCounter | None = None,
) -> RowPlan:
    """The prompt length of one row whose media are planned: exact with a counter, a bound without."""
    rid = row_id(row, index + 1)
    media = (*videos, *images)
    bad = [m for m in media if m.error]
    if bad:
        return RowPlan(index, rid, 0, 0, 0, False, media, f"{bad[0].kind} {bad[0].path}: {bad[0].error}")
    vision = sum(m.tokens for m in media)
    if counter is None:
        text = sum(len(t.encode("utf-8")) for t in _text_parts(messages)) + TEMPLATE_ALLOWANCE
        text += sum(_wrapper_bytes(family, m, image_spec) for m in media)  # timestamps, frame labels, span tokens
        return RowPlan(index, rid, text + vision, text, vision, False, media)
    try:
        rendered = counter.render(messages)
        expanded = family.expand_prompt(
            rendered,
            [(m.meta(), m.height, m.width) for m in videos],
            [(m.height, m.width) for m in images],
            image_spec,
        )
        total = counter.count(expanded)
    except Exception as exc:
        return RowPlan(index, rid, 0, 0, vision, False, media, f"prompt: {type(exc).__name__}: {exc}")
    return RowPlan(index, rid, total, total - vision, vision, True, media)


def _wrapper_bytes(family: ModelFamily, m: MediaPlan, image_spec: ImageSpec) -> int:
    """UTF-8 bytes of what the processor writes around one media item's placeholders (a bound on its tokens)."""
    if m.kind == "video":
        text = family.video_prompt(m.meta(), m.height, m.width)
    else:
        text = family.image_prompt(m.height, m.width, image_spec)
    return len(text.replace(family.image_token, "").replace(family.video_token, "").encode("utf-8"))


MessagesFn = Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]]


def plan_rows(
    rows: Iterable[Mapping[str, Any]],
    family: ModelFamily | str,
    video_spec: SamplingSpec,
    image_spec: ImageSpec,
    *,
    counter: TextCounter | None = None,
    messages: MessagesFn | None = None,
    prompt_key: str = "problem",
    data_file: str | os.PathLike[str] | None = None,
    media_root: str | os.PathLike[str] | None = None,
    allow_outside_media: bool = False,
    allow_remote_media: Iterable[str] = (),
) -> list[RowPlan]:
    """A `RowPlan` per row (a broken row gets `error`, never an exception). `messages(row)` renders a row as the
    trainer does (default: `default_messages`); media paths resolve like `evr1-cache build` resolves them. A row that
    `build --plan` resampled is planned under its own spec (`evr1_plan`, see `evr1_cache.plan.row_spec`)."""
    fam = get_family(family)
    fam.check_fits(video_spec, "the video spec")
    fam.check_fits(image_spec, "the image spec")
    out: list[RowPlan] = []
    for i, row in enumerate(rows):
        try:
            msgs = messages(row) if messages is not None else default_messages(row, prompt_key)
            spec = row_video_spec(row, video_spec, row_id(row, i + 1))
            videos, images = row_media(
                row,
                fam,
                spec,
                image_spec,
                data_file=data_file,
                media_root=media_root,
                allow_outside_media=allow_outside_media,
                allow_remote_media=allow_remote_media,
            )
        except Exception as exc:
            out.append(RowPlan(i, row_id(row, i + 1), 0, 0, 0, False, error=f"{type(exc).__name__}: {exc}"))
            continue
        out.append(plan_row(i, row, msgs, videos, images, fam, image_spec, counter))
    return out
