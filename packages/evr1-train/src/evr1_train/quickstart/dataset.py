"""Write the quickstart dataset: moving-shape clips (H.264 through FFmpeg) and still images, with questions.

Why: the quickstart has to run anywhere without downloads, and it must exercise what real video RL data has — several
problem types (multiple choice, numerical, temporal grounding), images and videos in one dataset, stored answers for
hybrid offline+online training, and a held-out split that is never trained on.

Rows follow the EasyVideoR1 schema that `evr1-cache build` reads (`problem` with a `<video>` / `<image>` placeholder,
`answer`, `videos` / `images`, `problem_type`, `options`, `data_type`, `has_offline_trajectory`, `offline_output`).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evr1_cache.atomic import atomic_open, atomic_text
from evr1_cache.registry import check_fields
from evr1_train.quickstart.shapes import FLASH_WINDOW, MIXES, Scene, make_scene, sample_kinds

SPLITS = ("train", "heldout")


@dataclass(frozen=True)
class QuickstartDataSpec:
    """How much data, and of what shape; the same spec and seed always give byte-identical rows and pixels."""

    n_train: int = 320
    n_heldout: int = 64
    size: int = 112
    fps: float = 8.0
    seed: int = 1234
    offline_fraction: float = 1.0  # share of training rows that carry a stored (correct) trajectory
    task: str = "shapes"  # shapes (TASK_MIX) | agent (AGENT_MIX: stored trajectories call get_frames, then answer)

    def __post_init__(self) -> None:
        if self.n_train < 1 or self.n_heldout < 1:
            raise ValueError(f"n_train and n_heldout must be >= 1, got {self.n_train}, {self.n_heldout}")
        if self.size % 4 or self.size < 32:
            raise ValueError(f"size must be a multiple of 4 and >= 32, got {self.size}")
        if not 0.0 <= self.offline_fraction <= 1.0:
            raise ValueError(f"offline_fraction must be in [0, 1], got {self.offline_fraction}")
        if self.task not in MIXES:
            raise ValueError(f"task must be one of {sorted(MIXES)}, got {self.task!r}")

    @classmethod
    def from_mapping(cls, mapping: Any) -> QuickstartDataSpec:
        data = dict(mapping.items()) if mapping is not None else {}
        check_fields("quickstart data", data, cls)
        return cls(**data)


def ground_truth(scene: Scene) -> str:
    """What the reward scorer compares against: a letter, a number, or `{"time": [start, end]}` (seconds)."""
    if scene.problem_type == "temporal grounding":
        start, end = (int(x) for x in scene.answer.split("-"))
        return json.dumps({"time": [start, end]})
    return scene.answer


def answer_text(scene: Scene) -> str:
    """The stored ("offline") response: the answer inside the `<answer>` tags the prompt and format reward ask for;
    for the agent task first the call that shows the flash (`get_frames` over FLASH_WINDOW, Qwen's `<tool_call>`)."""
    answer = f"<answer>{ground_truth(scene)}</answer>"
    return f"{EXPERT_CALL}\n{answer}" if scene.kind == "flash" else answer


def _expert_call() -> str:
    from evr1_cache.tools import HERMES, ToolCall

    start, end = FLASH_WINDOW
    return HERMES.render_call(ToolCall("get_frames", {"start": int(start), "end": int(end)}))


#: The stored trajectories' tool call (the one turn before the answer).
EXPERT_CALL = _expert_call()


def write_video(path: Path, scene: Scene) -> None:
    """Encode the scene's frames as H.264 (yuv420p), atomically, with evr1-cache's one (reproducible) encoder."""
    from evr1_cache import write_video as encode

    encode(path, scene.frames(), scene.fps)


def write_image(path: Path, scene: Scene) -> None:
    from PIL import Image

    with atomic_open(path, "wb") as fh:
        Image.fromarray(scene.frame(0.0)).save(fh, format="PNG")


def iter_scenes(spec: QuickstartDataSpec, split: str) -> Iterator[tuple[str, Scene]]:
    """(row id, scene) for one split; splits use disjoint random streams so held-out scenes are never trained on."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    n = spec.n_train if split == "train" else spec.n_heldout
    rng = random.Random(f"{spec.seed}-{split}")
    for i, kind in enumerate(sample_kinds(n, rng, MIXES[spec.task])):
        yield f"{split}-{i:05d}", make_scene(kind, rng, size=spec.size, fps=spec.fps)


def make_row(row_id: str, scene: Scene, media: str, offline: bool) -> dict[str, Any]:
    return {
        "problem_id": row_id,
        "data_source": f"evr1-quickstart/{scene.kind}",
        "data_type": scene.modality,
        "problem_type": scene.problem_type,
        # the question with its media placeholder; evr1_train.data adds the lead-in, the options and the answer format
        "problem": ("<video>" if scene.modality == "video" else "<image>") + scene.question,
        "options": list(scene.options),
        "answer": ground_truth(scene),
        "videos": [media] if scene.modality == "video" else [],
        "images": [media] if scene.modality == "image" else [],
        "has_offline_trajectory": offline,
        "offline_output": answer_text(scene) if offline else "",
        "kind": scene.kind,
    }


def generate_quickstart_data(
    out_dir: str | os.PathLike[str], spec: QuickstartDataSpec, progress: bool = True
) -> dict[str, Path]:
    """Write media and `<split>.jsonl` for each split under `out_dir`; returns split -> raw dataset file.

    Resumable: a finished split (its JSONL exists and `manifest.json` matches the spec) is kept; media files that
    already exist are not re-encoded. A different spec in the same folder is an error, never a silent mix.
    """
    out = Path(out_dir)
    media_dir = out / "media"
    media_dir.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.json"
    want = asdict(spec)
    if manifest.exists():
        have = json.loads(manifest.read_text())
        if have != want:
            raise ValueError(
                f"{out} holds quickstart data made with other settings ({have}); delete it or choose another folder"
            )
    else:
        atomic_text(manifest, json.dumps(want, indent=1))
    files: dict[str, Path] = {}
    for split in SPLITS:
        target = out / f"{split}.jsonl"
        files[split] = target
        if target.exists():
            continue
        rows = []
        n = spec.n_train if split == "train" else spec.n_heldout
        scenes: Iterable[tuple[str, Scene]] = iter_scenes(spec, split)
        if progress:
            from tqdm.auto import tqdm

            scenes = tqdm(scenes, total=n, desc=f"quickstart {split} media", unit="clip", leave=False)
        offline_rng = random.Random(f"{spec.seed}-offline")
        for row_id, scene in scenes:
            suffix = ".mp4" if scene.modality == "video" else ".png"
            path = media_dir / f"{row_id}{suffix}"
            if not path.exists():
                (write_video if scene.modality == "video" else write_image)(path, scene)
            offline = split == "train" and offline_rng.random() < spec.offline_fraction
            rows.append(make_row(row_id, scene, f"media/{path.name}", offline))
        atomic_text(target, "".join(json.dumps(r) + "\n" for r in rows))
    return files
