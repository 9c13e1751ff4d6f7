"""One dataset row -> chat messages, pixels and reward extras. verl-free: the local engine calls the same code.

Why: the verl dataset (prompt side), its agent-loop classmethod (pixel side) and the local engine must agree on
prompts, media order and the `extra_info` the reward sees (problem_type, options — EasyVideoR1 dropped the options).

Names (stable):
    RowInputs(messages, images, videos, ground_truth, data_source, problem_type, extra_info, offline_text)
    row_messages(row, opts) -> list[dict]           # media items carry absolute paths / PIL images, no frames
    load_media(messages, opts, row) -> (images | None, videos | None)   # videos: [(frames [T,H,W,3] uint8, meta)]
    loader_for(opts) -> evr1_cache.MediaLoader      # the one media loader, set up by the options (one per process)
    tool_loader(opts) -> evr1_cache.MediaLoader     # the write-through loader tools read frames through
    row_extra_info(row, opts, index) -> dict
    ground_truth_of(row, opts) -> Any
    row_to_inputs(row, opts, index=0, hybrid=None) -> RowInputs
    media_items(messages) -> list[dict]
    row_spec(row, opts, name=None) -> SamplingSpec | None   # the row's own video spec (`build --plan` resampled it)
    check_model_family(opts, processor, model=None) -> ModelFamily | None
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evr1_cache import BOOKKEEPING_COLUMNS, MediaLoader, cache_refs, media_mode, row_id
from evr1_rewards import normalize_problem_type
from evr1_rewards.vocabulary import OPEN_ENDED
from evr1_train.data.options import DataOptions
from evr1_train.data.prompt import build_prompt_text

if TYPE_CHECKING:
    from evr1_cache.spec import SamplingSpec

#: Columns consumed by evr1 itself; every other column is forwarded to the reward in `extra_info`.
_CORE = BOOKKEEPING_COLUMNS
_ANSWER_TAG = re.compile(r"^\s*<answer>(.*)</answer>\s*$", re.DOTALL)
#: Key of a video content item carrying its row's own video spec (`SamplingSpec.to_dict()`); absent = the configured
#: spec. It travels with the messages, so verl's agent-loop workers (which only see the messages) serve it too.
SPEC_ITEM_KEY = "evr1_spec"


@dataclass(frozen=True)
class RowInputs:
    """Everything a rollout + reward needs for one row. `videos[i] = (frames uint8 [T,H,W,3], VideoMeta.to_hf())`."""

    messages: list[dict[str, Any]]
    images: list[Any]
    videos: list[tuple[Any, dict[str, Any]]]
    ground_truth: Any
    data_source: str
    problem_type: str
    extra_info: dict[str, Any]
    offline_text: str | None = None


_LOADERS: dict[str, MediaLoader] = {}
_LOADERS_LOCK = threading.Lock()


def loader_for(opts: DataOptions) -> MediaLoader:
    """evr1-cache's media loader as `opts` configure it (`video_source` is its mode); one per distinct options per
    process, since verl's agent-loop workers ask for one on every sample."""
    key = repr(opts)
    with _LOADERS_LOCK:
        if key not in _LOADERS:
            _LOADERS[key] = MediaLoader(
                opts.cache_dir,
                mode=media_mode(opts.video_source),
                video_spec=opts.video_spec(),
                image_spec=opts.image_spec(),
                media_root=opts.media_root,
                paths=opts.media_paths(),  # a file read from disk stays inside the media root unless opted out
                miss_fix="run `evr1-cache build` on the dataset with the same video settings, or set "
                "data.evr1.video_source=prefer_cache",
            )
        return _LOADERS[key]


#: One write-through loader per cache folder and media root per process (verl builds an agent loop per sample).
_TOOL_LOADERS: dict[tuple[str | None, str | None], MediaLoader] = {}


def tool_loader(opts: DataOptions) -> MediaLoader:
    """The media loader tools read through (`evr1_cache.tools`, both engines): the training cache, written through
    on a tool's first use."""
    key = (opts.cache_dir, opts.media_root)
    with _LOADERS_LOCK:
        if key not in _TOOL_LOADERS:
            # no path rule here: a tool opens only the video its row's prompt already served, which the row's own
            # loader checked against the dataset's media root (a verl worker does not know the dataset's folder)
            _TOOL_LOADERS[key] = MediaLoader(
                opts.cache_dir, mode="prefer-cache", write_cache=bool(opts.cache_dir), media_root=opts.media_root
            )
        return _TOOL_LOADERS[key]


def row_messages(row: Mapping[str, Any], opts: DataOptions) -> list[dict[str, Any]]:
    """System (optional) + user turn whose content list interleaves text with media references, in placeholder order."""
    text = build_prompt_text(row, opts)
    own = row_spec(row, opts)
    images = list(row.get(opts.image_key) or [])
    videos = list(row.get(opts.video_key) or [])
    video_refs = _ref_files(row, "video", len(videos))
    image_refs = _ref_files(row, "image", len(images))
    content: list[dict[str, Any]] = []
    resolve = loader_for(opts).resolve
    ii = vi = 0
    for seg in re.split(r"(<video>|<image>)", text):
        if seg == "<video>":
            item: dict[str, Any] = {
                "type": "video",
                "video": resolve(videos[vi]),
                "evr1_cache": video_refs[vi],
            }
            if own is not None:
                item[SPEC_ITEM_KEY] = own.to_dict()
            content.append(item)
            vi += 1
        elif seg == "<image>":
            img = images[ii]
            if isinstance(img, Mapping) and img.get("bytes") is not None:
                content.append({"type": "image", "image": {"bytes": img["bytes"]}})
            else:
                src = img.get("image") if isinstance(img, Mapping) else img
                content.append({"type": "image", "image": resolve(str(src)), "evr1_cache": image_refs[ii]})
            ii += 1
        elif seg:
            content.append({"type": "text", "text": seg})
    messages: list[dict[str, Any]] = []
    if opts.system_prompt:
        messages.append({"role": "system", "content": opts.system_prompt})
    messages.append({"role": "user", "content": content})
    return messages


def row_spec(row: Mapping[str, Any], opts: DataOptions, name: str | None = None) -> SamplingSpec | None:
    """The row's own video spec when `evr1-cache build --plan` resampled it (its `evr1_plan` column), else None (the
    configured `data.evr1.video` spec). A malformed override is a `RowSpecError` naming the row."""
    from evr1_cache.plan import has_row_spec, row_video_spec

    return row_video_spec(row, opts.video_spec(), name) if has_row_spec(row) else None


def item_spec(item: Mapping[str, Any]) -> SamplingSpec | None:
    """The video spec a content item of `row_messages` carries (None: the configured one)."""
    settings = item.get(SPEC_ITEM_KEY)
    if settings is None:
        return None
    from evr1_cache.spec import SamplingSpec

    return SamplingSpec.from_dict(settings)


def _ref_files(row: Mapping[str, Any], kind: str, count: int) -> list[str | None]:
    """The entry file of each media item's cache reference (`evr1_cache.dataset.cache_refs`), None where none."""
    return [
        str(r["file"]) if r and isinstance(r.get("file"), str) and r["file"] else None
        for r in cache_refs(row, kind, count)
    ]


def media_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Image/video content items in prompt order."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            out += [dict(c) for c in content if isinstance(c, Mapping) and c.get("type") in ("image", "video")]
    return out


def load_media(
    messages: Sequence[Mapping[str, Any]], opts: DataOptions, row: str = "?"
) -> tuple[list[Any] | None, list[tuple[Any, dict[str, Any]]] | None]:
    """Pixels for every media item of the prompt (None for a modality the prompt does not have, as verl expects)."""
    from PIL import Image

    loader = loader_for(opts)
    images: list[Any] = []
    videos: list[tuple[Any, dict[str, Any]]] = []
    for item in media_items(messages):
        if item["type"] == "video":
            served = loader.video(item["video"], item_spec(item), ref=item.get("evr1_cache"), row=row)
            videos.append((served.frames, served.meta.to_hf()))
        else:
            src = item["image"]
            src = src["bytes"] if isinstance(src, Mapping) and src.get("bytes") is not None else src
            src = src["image"] if isinstance(src, Mapping) else src
            images.append(Image.fromarray(loader.image(src, ref=item.get("evr1_cache"), row=row).pixels))
    return (images or None), (videos or None)


def ground_truth_of(row: Mapping[str, Any], opts: DataOptions) -> Any:
    """The answer column (verl-native rows: `reward_model.ground_truth`); a whole-value `<answer>X</answer>` -> X."""
    rm = row.get("reward_model")
    if opts.answer_key in row and row[opts.answer_key] is not None:
        gt = row[opts.answer_key]
    elif isinstance(rm, Mapping) and "ground_truth" in rm:
        gt = rm["ground_truth"]
    else:
        raise ValueError(
            f"row has no {opts.answer_key!r} column and no reward_model.ground_truth; set data.evr1.answer_key"
        )
    m = _ANSWER_TAG.match(gt) if isinstance(gt, str) else None
    return m.group(1).strip() if m else gt


def row_extra_info(row: Mapping[str, Any], opts: DataOptions, index: int) -> dict[str, Any]:
    """What the reward sees besides the response: problem_type, options and every other non-media column."""
    skip = _CORE | {opts.prompt_key, opts.answer_key, opts.video_key, opts.image_key}
    extra: dict[str, Any] = {k: v for k, v in row.items() if k not in skip}
    given = row.get("extra_info")
    if isinstance(given, Mapping):
        extra.update(given)
    extra["index"] = extra.get("index", index)
    extra["problem_type"] = normalize_problem_type(row.get("problem_type") or extra.get("problem_type") or OPEN_ENDED)
    extra["options"] = list(row.get("options") or extra.get("options") or [])
    extra["question"] = row.get(opts.prompt_key)
    return extra


def row_to_inputs(row: Mapping[str, Any], opts: DataOptions, index: int = 0, hybrid: Any = None) -> RowInputs:
    """The local engine's entry point: messages + pixels + reward inputs for one row."""
    from evr1_train.hybrid import row_offline_text

    messages = row_messages(row, opts)
    images, videos = load_media(messages, opts, row_id(row, index + 1))
    extra = row_extra_info(row, opts, index)
    return RowInputs(
        messages=messages,
        images=images or [],
        videos=videos or [],
        ground_truth=ground_truth_of(row, opts),
        data_source=str(row.get("data_source") or "evr1"),
        problem_type=extra["problem_type"],
        extra_info=extra,
        offline_text=row_offline_text(row, hybrid) if hybrid is not None else None,
    )


def check_model_family(opts: DataOptions, processor: Any, model: str | None = None) -> Any:
    """The model family (`evr1_cache.families`) of a checkpoint / loaded processor, after checking that the configured
    video and image specs were made for it; None when no family serves it (then nothing can be checked).

    Why: a Qwen3-VL run with Qwen2.5-VL's 28-px spec, or a GLM-4.1V run with Qwen-sampled frames, trains on inputs
    the processor silently re-sizes or mis-times; failing when the data is set up names the fix."""
    from evr1_cache.families import family_of_processor, family_or_none

    family = (family_or_none(model) if model else None) or family_of_processor(processor)
    if family is not None:
        family.check_fits(opts.video_spec(), "data.evr1.video")
        family.check_fits(opts.image_spec(), "data.evr1.image")
    return family
