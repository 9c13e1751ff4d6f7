"""Rollout dumps: every N steps, each prompt of the batch with its media references and all its responses.

Why: when a reward stays flat, falls or gets hacked, the answer is in what the model saw and said, and how each reward
component scored it. Both engines (the local engine and verl) write the same records; `evr1-train view RUN/` turns
them into the evr1 viewer (frames read back from the frame cache, so no pixels are stored here).

Layout, under `<run output>/rollouts/` (or `evr1.rollout_dump.dir`):
    step-000010.jsonl   one JSON object per prompt group of that step (schema below), written atomically
    manifest.json       settings, frame cache + specs, the dumped steps with their sizes, what the cap dropped

Guarantees:
  * Append-only and resumable: a step file is written to a temp name and renamed, so it is complete or absent. A
    process that starts at step S (fresh or resumed from a checkpoint) first deletes the step files >= S, left by a
    run that went past its last checkpoint before it died; redone steps are then written once. Nothing is lost
    either: every step < S stays as it was.
  * Bounded: `max_bytes` caps the sum of all step files. At the cap, `on_cap=stop` keeps the earliest steps and
    writes no more (recorded as `capped_at_step` in the manifest, one warning); `on_cap=rotate` deletes the oldest
    step files to make room (recorded in `rotated_out`). Texts longer than `max_chars` are cut with a marker.

Record (one line, `schema: "evr1.rollouts/1"`):
    step, engine, uid, row_id, task, data_source, problem_type, prompt, system, prompt_record, ground_truth,
    media: [{kind, path, cache_file, frame_indices, timestamps, frames_from}],
    responses: [{text, extracted, offline, reward: {overall, accuracy, format, ...}, advantage, tokens, details}]
`prompt_record` is the prompt as sent (`evr1_cache.PromptRecord.to_dict()`: text and media in order, its hash), made
from the messages the engine built; `prompt` / `system` are its text (cut at `max_chars`) for a quick read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache import PromptRecord
from evr1_cache.atomic import atomic_bytes, atomic_text
from evr1_cache.registry import check_fields
from evr1_cache.spec import check_int

if TYPE_CHECKING:
    from evr1_cache import ImageSpec, SamplingSpec
    from evr1_train.data import DataOptions

logger = logging.getLogger(__name__)

SCHEMA = "evr1.rollouts/1"
STEP_FILE = re.compile(r"^step-(\d{6,})\.jsonl$")
CAP_POLICIES = ("stop", "rotate")


@dataclass(frozen=True)
class DumpConfig:
    """`evr1.rollout_dump` (see the module docstring); validated here with the key names in the messages."""

    enable: bool = False
    every_n_steps: int = 10
    #: Also dump step 1, the baseline every later step is compared with.
    include_first: bool = True
    dir: str | None = None
    max_bytes: int = 1 << 30
    on_cap: str = "stop"
    #: Prompt groups per dumped step (0 = every prompt of the batch).
    max_groups_per_step: int = 0
    max_chars: int = 8000
    #: Local engine: build the HTML viewer at the end of the run (the quickstart does).
    write_viewer: bool = False

    def __post_init__(self) -> None:
        check_int("evr1.rollout_dump", "every_n_steps", self.every_n_steps, 1)
        check_int("evr1.rollout_dump", "max_bytes", self.max_bytes, 1)
        if self.on_cap not in CAP_POLICIES:
            raise ValueError(f"evr1.rollout_dump.on_cap must be one of {CAP_POLICIES}, got {self.on_cap!r}")
        if self.max_groups_per_step < 0 or self.max_chars < 100:
            raise ValueError("evr1.rollout_dump: max_groups_per_step must be >= 0 and max_chars >= 100")

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None) -> DumpConfig:
        data = dict(node or {})
        check_fields("evr1.rollout_dump", data, cls)
        return cls(**{k: v for k, v in data.items() if v is not None or k == "dir"})

    def due(self, step: int) -> bool:
        return self.enable and ((self.include_first and step == 1) or step % self.every_n_steps == 0)


def step_path(folder: Path, step: int) -> Path:
    return folder / f"step-{step:06d}.jsonl"


def dumped_steps(folder: Path) -> dict[int, Path]:
    found = [(m, p) for p in (folder.iterdir() if folder.is_dir() else ()) if (m := STEP_FILE.match(p.name))]
    return dict(sorted((int(m.group(1)), p) for m, p in found))


def cut(text: str | None, limit: int) -> tuple[str | None, int]:
    """(text cut to `limit` characters, how many were cut)."""
    if text is None or len(text) <= limit:
        return text, 0
    n = len(text) - limit
    return text[:limit] + f"\n[... {n} characters cut by evr1.rollout_dump.max_chars]", n


def _finite(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class _Manifest:
    schema: str = SCHEMA
    engine: str = ""
    cache_dir: str | None = None
    video_spec: dict[str, Any] | None = None
    image_spec: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, dict[str, int]] = field(default_factory=dict)
    capped_at_step: int | None = None
    rotated_out: list[int] = field(default_factory=list)
    dropped_on_resume: list[int] = field(default_factory=list)


class RolloutDumpWriter:
    """Writes step files and the manifest for one run; one writer per process (the driver on verl)."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        config: DumpConfig,
        *,
        engine: str,
        cache_dir: str | None = None,
        video_spec: Mapping[str, Any] | None = None,
        image_spec: Mapping[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.config = config
        self._lock = threading.Lock()
        self._warned_cap = False
        self.manifest = self._read_manifest()
        self.manifest.engine = engine
        self.manifest.cache_dir = os.path.abspath(cache_dir) if cache_dir else None
        self.manifest.video_spec = dict(video_spec) if video_spec else None
        self.manifest.image_spec = dict(image_spec) if image_spec else None
        self.manifest.config = asdict(config)
        #: The data options the rows of this run are served with (set by the verl hook, which rebuilds prompts).
        self.opts: DataOptions | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self, first_step: int) -> list[int]:
        """Called once before the first step this process runs: drop step files >= `first_step` (see module doc)."""
        dropped = []
        with self._lock:
            for step, path in dumped_steps(self.folder).items():
                if step >= first_step:
                    path.unlink(missing_ok=True)
                    self.manifest.steps.pop(str(step), None)
                    dropped.append(step)
            if self.manifest.capped_at_step is not None and self.manifest.capped_at_step >= first_step:
                self.manifest.capped_at_step = None
            self.manifest.dropped_on_resume = sorted({*self.manifest.dropped_on_resume, *dropped})
            self._sync_steps()
            if self.config.enable:
                self._write_manifest()
        if dropped:
            logger.info("rollout dump: resuming at step %d, dropped dumps of steps %s", first_step, dropped)
        return dropped

    def write_step(self, step: int, groups: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write one step's records (already built with `group_record`); None when the cap or a limit skipped it."""
        if not groups:
            return None
        cfg = self.config
        if cfg.max_groups_per_step:
            groups = groups[: cfg.max_groups_per_step]
        lines = "".join(json.dumps({"schema": SCHEMA, "step": step, **g}, ensure_ascii=False, default=str) + "\n"
                        for g in groups)  # fmt: skip
        data = lines.encode("utf-8")
        with self._lock:
            self._sync_steps()
            final = step_path(self.folder, step)
            used = sum(v["bytes"] for k, v in self.manifest.steps.items() if int(k) != step)
            if used + len(data) > cfg.max_bytes:
                if cfg.on_cap == "rotate" and len(data) <= cfg.max_bytes:
                    for old in sorted(int(k) for k in self.manifest.steps if int(k) != step):
                        if used + len(data) <= cfg.max_bytes:
                            break
                        used -= self.manifest.steps.pop(str(old))["bytes"]
                        step_path(self.folder, old).unlink(missing_ok=True)
                        self.manifest.rotated_out.append(old)
                else:
                    if self.manifest.capped_at_step is None:
                        self.manifest.capped_at_step = step
                    self._write_manifest()
                    if not self._warned_cap:
                        self._warned_cap = True
                        logger.warning(
                            "rollout dump: evr1.rollout_dump.max_bytes=%d reached at step %d (%s); no more steps are "
                            "dumped (raise max_bytes, or on_cap=rotate to keep the newest steps instead)",
                            cfg.max_bytes, step, self.folder,
                        )  # fmt: skip
                    return None
            atomic_bytes(final, data)
            self.manifest.steps[str(step)] = {"bytes": len(data), "groups": len(groups)}
            self._write_manifest()
        return final

    # -- manifest ----------------------------------------------------------------------------------------------
    def _sync_steps(self) -> None:
        """The manifest lists exactly the step files on disk (a file deleted by hand is forgotten)."""
        on_disk = dumped_steps(self.folder)
        steps = {str(s): self.manifest.steps.get(str(s)) or {"bytes": p.stat().st_size, "groups": -1}
                 for s, p in on_disk.items()}  # fmt: skip
        self.manifest.steps = steps

    def _read_manifest(self) -> _Manifest:
        path = self.folder / "manifest.json"
        if not path.is_file():
            return _Manifest()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            names = set(_Manifest.__dataclass_fields__)
            return _Manifest(**{k: v for k, v in data.items() if k in names})
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("rollout dump: %s unreadable (%s); starting a new manifest", path, exc)
            return _Manifest()

    def _write_manifest(self) -> None:
        atomic_text(self.folder / "manifest.json", json.dumps(asdict(self.manifest), indent=1, sort_keys=True))


# -- building records ------------------------------------------------------------------------------------------------
def media_records(
    messages: Sequence[Mapping[str, Any]], cache_dir: str | None, video_spec: SamplingSpec, image_spec: ImageSpec
) -> list[dict[str, Any]]:
    """The media of a prompt as dump records: source path, cache entry, frame indices and timestamps.

    The entry is the one evr1-cache's media loader names (`MediaLoader.entry_file`: the row's own reference, written
    by `evr1-cache build`, else the content-addressed entry for the path and the item's spec); its frame indices are
    read from the entry's header (no pixels are read). Without an entry the frames were decoded on the fly
    (`frames_from: "decoded"`) with the same spec.
    """
    from evr1_cache import MediaLoader
    from evr1_cache.viewer import entry_frames
    from evr1_train.data.row import item_spec, media_items

    out = []
    cache = cache_dir if cache_dir and os.path.isdir(cache_dir) else None
    loader = MediaLoader(cache, video_spec=video_spec, image_spec=image_spec)
    for item in media_items(messages):
        kind = item["type"]
        src = item.get(kind)
        path = src if isinstance(src, str) else None
        record: dict[str, Any] = {"kind": kind, "path": path, "cache_file": None, "frame_indices": [],
                                  "timestamps": [], "frames_from": "decoded" if path else "inline"}  # fmt: skip
        spec = (item_spec(item) or video_spec) if kind == "video" else image_spec
        try:
            rel = loader.entry_file(path, spec, item.get("evr1_cache")) if path and cache else None
            if rel is not None and cache is not None:
                record.update(cache_file=rel, frames_from="cache")
                if kind == "video":
                    indices, stamps = entry_frames(Path(cache) / rel)
                    record.update(frame_indices=list(indices), timestamps=list(stamps))
        except (OSError, ValueError, KeyError) as exc:
            record["note"] = f"cache lookup failed: {type(exc).__name__}: {exc}"
        out.append(record)
    return out


def tool_media_records(
    record: Mapping[str, Any], video: str, cache_dir: str | None, streams: Mapping[str, SamplingSpec], label: str
) -> list[dict[str, Any]]:
    """The frames an agent episode's tool calls returned (`ToolSession.record()`), as dump media records: the entry
    of the cached stream each call served from and the positions it picked, labelled `label`, turn and call."""
    from evr1_cache import MediaLoader

    cache = cache_dir if cache_dir and os.path.isdir(cache_dir) else None
    if cache is None:
        return []
    loader = MediaLoader(cache)
    out = []
    for n, turn in enumerate(record.get("turns") or [], 1):
        for call in turn.get("calls") or []:
            for media in call.get("media") or []:
                spec = streams.get(str(media.get("stream")))
                if spec is None:
                    continue
                args = ", ".join(f"{k}={v}" for k, v in (call.get("arguments") or {}).items())
                what = "the source frame of its crop" if media.get("kind") == "image" else "these frames"
                out.append({
                    "kind": "video", "path": video, "cache_file": loader.entry_file(video, spec, None),
                    "frame_indices": [], "timestamps": list(media.get("timestamps") or []),
                    "positions": list(media.get("positions") or []), "frames_from": "cache",
                    "note": f"{label}, turn {n}: {call.get('name')}({args}) returned {what}",
                })  # fmt: skip
    return out


def extracted_answer(text: str, ground_truth: Any, problem_type: str, extras: Mapping[str, Any]) -> str | None:
    """What evr1-rewards' extractor reads from `text` (for highlighting only; the reward is the recorded one)."""
    try:
        from evr1_rewards import score

        options = extras.get("options")
        res = score(text, ground_truth, problem_type, options=list(options) if options else None, mode="metric")
    except Exception:  # display only: an unscorable answer simply has no highlight
        return None
    details = res.details or {}
    value = details.get("pred", details.get("extracted"))
    return None if value is None or str(value) == "" else str(value)[:500]


def group_record(
    *,
    engine: str,
    uid: str,
    row_id: str,
    task: str,
    data_source: str,
    problem_type: str,
    messages: Sequence[Mapping[str, Any]],
    ground_truth: Any,
    media: Sequence[Mapping[str, Any]],
    responses: Sequence[Mapping[str, Any]],
    max_chars: int,
    extras: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One dump line (without `schema`/`step`, which `write_step` adds). `responses[i]` holds text, offline,
    reward (a dict of components), advantage, tokens and optional details; the extracted answer is added here."""
    sent = PromptRecord.from_messages(messages)
    out_responses = []
    for r in responses:
        text = r.get("text")
        shown, cut_chars = cut(text, max_chars)
        out_responses.append(
            {
                "text": shown,
                "extracted": extracted_answer(text or "", ground_truth, problem_type, extras or {}),
                "offline": bool(r.get("offline", False)),
                "reward": {str(k): _finite(v) for k, v in dict(r.get("reward") or {}).items()},
                "advantage": _finite(r.get("advantage")),
                "tokens": r.get("tokens"),
                **({"cut_chars": cut_chars} if cut_chars else {}),
                **({"details": dict(r["details"])} if r.get("details") else {}),
            }
        )
    gt = ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, ensure_ascii=False, default=str)
    return {
        "engine": engine,
        "uid": uid,
        "row_id": row_id,
        "task": task,
        "data_source": data_source,
        "problem_type": problem_type,
        "prompt": cut(sent.text, max_chars)[0] or "",
        "system": sent.system,
        "prompt_record": sent.to_dict(),
        "ground_truth": cut(gt, max_chars)[0],
        "media": list(media),
        "responses": out_responses,
    }
