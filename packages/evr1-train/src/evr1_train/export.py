"""`evr1-train export-heldout RUN OUT`: a run's held-out split as a file `evr1-eval run` reads (benchmark `evr1_data`).

Why: "the trainer says 0.86 on its held-out clips" and "the evaluator says X on them" must be about the same rows,
asked the same way and scored by the same rule. The export writes exactly the rows the trainer validates on (the
same filter drops the same unusable rows), in evr1-train's own row schema, with what evaluation needs and the
trainer computes at run time written down: the media paths resolved as the trainer resolves them, the ground truth as
the trainer reads it, the reward's inputs (`reward_extras`, the row columns the trainer hands its reward) and the
row's `kind` (the trainer's `val/accuracy/<kind>`). Evaluate it with the checkpoint's own settings:

    evr1-train export-heldout runs/quickstart runs/quickstart/heldout-eval/
    evr1-eval run --from-train runs/quickstart --backend hf --benchmarks evr1_data \\
        --annotations-dir runs/quickstart/heldout-eval --cache-dir runs/quickstart/cache --out runs/quickstart/eval

RUN is a run folder or one of its `checkpoints/step_N` folders (the data are the run's, whatever the step). OUT is a
folder (the file is `OUT/evr1_data.jsonl`) or a file named `evr1_data.jsonl` / `heldout.jsonl` (the names evr1-eval
looks for). Exit codes: 0 written; 1 some rows could not be exported (named; the others are written); 2 bad arguments.

Names (stable): export_heldout(run, out, split="heldout") -> ExportReport, run_data(run, split) -> RunData,
export_row(row, index, opts), main(argv) -> int, EVAL_BENCHMARK, command_prefix(environ=None),
evaluation_commands(run, cache_dir, annotations=None, prefix=None)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_train.runs import SETTINGS_FILE

if TYPE_CHECKING:
    from evr1_train.data import DataOptions

logger = logging.getLogger(__name__)

#: The evr1-eval benchmark that reads the exported rows, and the file names it looks for.
EVAL_BENCHMARK = "evr1_data"
EVAL_FILE_NAMES = ("evr1_data.jsonl", "heldout.jsonl")
#: Row columns the export drops: the cache bookkeeping of `evr1-cache build` (paths into one machine's cache) and
#: stored answers (a held-out row has none; a trajectory is not a question).
_DROPPED = ("video_cache", "image_cache", "cache_errors", "offline_output", "has_offline_trajectory")


@dataclass
class ExportReport:
    path: Path
    rows: int
    kinds: dict[str, int]
    cache_dir: str | None
    failed: list[str] = field(default_factory=list)
    #: where the trainer read the media (data.evr1.media_root): the exported rows' media lie there, evr1-eval's
    #: `--media-root` (media outside the annotations' folder are refused without it)
    media_root: str | None = None


def run_folder(path: str | Path) -> Path:
    """The run folder of `path` (a run folder, `checkpoints/`, a `step_N` folder or its `actor/`)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"{path}: no such run or checkpoint folder ({p.absolute()})")
    for folder in (p, *p.parents[:3]):
        if (folder / SETTINGS_FILE).is_file():
            return folder
    raise FileNotFoundError(
        f"{path}: no {SETTINGS_FILE} here or above (a local-engine run folder holds one); pass the run folder"
    )


def _unflatten(flat: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if not key.startswith(prefix):
            continue
        node = out
        *parents, last = key[len(prefix) :].split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _files(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"the run's {key} is {value!r}: nothing to export")


def _usable_rows(rows: list[dict[str, Any]], opts: DataOptions, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows the trainer keeps (`engine.rows.usable_rows` with the trainer's row check, on its own inputs)."""
    from evr1_rewards import RewardRouter
    from evr1_train.engine.rows import check_row, usable_rows

    weights = _unflatten(settings, "engine.reward.weights.") or None
    router = RewardRouter(weights, think=settings.get("engine.reward.think", "optional"))
    return usable_rows(rows, opts, "held-out", lambda row, index: check_row(row, index, opts, router))


def export_row(row: Mapping[str, Any], index: int, opts: DataOptions) -> dict[str, Any]:
    """One row as evr1-eval's `evr1_data` reads it, carrying what the trainer derives from it at validation."""
    from evr1_cache import row_id
    from evr1_train.data import ground_truth_of, row_extra_info, row_messages
    from evr1_train.data.row import media_items

    extras = row_extra_info(row, opts, index)
    videos: list[str] = []
    images: list[str] = []
    for item in media_items(row_messages(row, opts)):
        ref = item.get(item["type"])
        if not isinstance(ref, str):
            raise ValueError(f"{item['type']} given as bytes, not a file: it cannot be exported")
        (videos if item["type"] == "video" else images).append(str(Path(ref).absolute()))
    out = {k: v for k, v in row.items() if k not in _DROPPED}
    for key in {opts.prompt_key, opts.answer_key, opts.video_key, opts.image_key} - {"problem", "answer"}:
        out.pop(key, None)
    out.update(
        problem_id=row_id(row, index + 1),
        problem=row[opts.prompt_key],
        answer=ground_truth_of(row, opts),
        problem_type=extras["problem_type"],
        options=extras["options"],
        videos=videos,
        images=images,
        kind=str(row.get("kind") or row.get("data_source") or extras["problem_type"]),
        reward_extras=extras,
    )
    return out


def _target(out: str | Path) -> Path:
    p = Path(out).expanduser()
    if p.suffix == ".jsonl":
        if p.name not in EVAL_FILE_NAMES:
            raise ValueError(
                f"{out}: evr1-eval finds this benchmark's file as {' or '.join(EVAL_FILE_NAMES)} in --annotations-dir; "
                "name it so, or pass a folder"
            )
        return p
    return p / EVAL_FILE_NAMES[0]


@dataclass
class RunData:
    """A run's data as its trainer sees them: the recorded settings, the `DataOptions` and the usable rows."""

    folder: Path
    settings: dict[str, Any]
    opts: DataOptions
    rows: list[dict[str, Any]]


def run_data(run: str | Path, split: str = "heldout") -> RunData:
    """The rows the trainer of `run` validates on (`split="train"`: trains on), after its own usability filter."""
    from evr1_cache import read_rows
    from evr1_train.data import DataOptions

    folder = run_folder(run)
    record = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    settings: dict[str, Any] = dict(record.get("settings", record))
    train_files = _files(settings.get("data.train_files"), "data.train_files")
    files = train_files if split == "train" else _files(settings.get("data.val_files"), "data.val_files")
    # the trainer's own DataOptions: its base folder is the training file's (engine.base.BaseTrainer)
    opts = DataOptions.from_mapping(_unflatten(settings, "data.evr1."), base_dir=str(Path(train_files[0]).parent))
    return RunData(folder, settings, opts, _usable_rows(read_rows(*files), opts, settings))


def export_heldout(run: str | Path, out: str | Path, split: str = "heldout") -> ExportReport:
    """Write the run's held-out rows (or `split="train"`: its training rows) to `out`; see the module docstring."""
    from evr1_cache import row_id
    from evr1_cache.atomic import atomic_text

    data = run_data(run, split)
    opts = data.opts
    lines: list[str] = []
    kinds: dict[str, int] = {}
    failed: list[str] = []
    for index, row in enumerate(data.rows):
        try:
            exported = export_row(row, index, opts)
        except (ValueError, KeyError, TypeError) as exc:
            failed.append(f"row {row_id(row, index + 1)}: {exc}")
            continue
        kinds[exported["kind"]] = kinds.get(exported["kind"], 0) + 1
        lines.append(json.dumps(exported, ensure_ascii=False) + "\n")
    target = _target(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_text(target, "".join(lines))
    return ExportReport(target, len(lines), dict(sorted(kinds.items())), opts.cache_dir, failed, opts.media_root)


def command_prefix(environ: Mapping[str, str] | None = None) -> str:
    """`uv run ` when this process was started by `uv run` (uv sets `UV` in its children), else nothing: the next
    command a run prints must be one the user can paste as is."""
    env = os.environ if environ is None else environ
    return "uv run " if env.get("UV") else ""


def evaluation_commands(
    run: str | Path,
    cache_dir: str | None,
    annotations: str | Path | None = None,
    prefix: str | None = None,
    media_root: str | None = None,
) -> list[str]:
    """The commands that evaluate `run` on its held-out rows as it was trained: `export-heldout`, then `evr1-eval run
    --from-train` (the export is skipped from the list when `annotations` already holds it)."""
    pre = command_prefix() if prefix is None else prefix
    run = Path(run)
    folder = Path(annotations) if annotations is not None else run / "heldout"
    cache = f" --cache-dir {cache_dir}" if cache_dir else ""
    cache += f" --media-root {media_root}" if media_root else ""  # held-out rows name media outside their folder
    evaluate = (
        f"{pre}evr1-eval run --from-train {run} --backend hf --benchmarks {EVAL_BENCHMARK} "
        f"--annotations-dir {folder}{cache} --out {run / 'eval'}"
    )
    return [evaluate] if annotations is not None else [f"{pre}evr1-train export-heldout {run} {folder}", evaluate]


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="evr1-train export-heldout",
        description="Write a run's held-out rows as a file evr1-eval evaluates (benchmark evr1_data), exactly the "
        "rows the trainer validates on, with their resolved media, ground truth, reward inputs and kind.",
        epilog="example: evr1-train export-heldout runs/quickstart runs/quickstart/heldout-eval/",
    )
    ap.add_argument("run", help="run folder, or one of its checkpoints/step_N folders")
    ap.add_argument("out", help="output folder (writes OUT/evr1_data.jsonl), or a file named evr1_data.jsonl")
    ap.add_argument(
        "--split", choices=("heldout", "train"), default="heldout", help="which data files (default heldout)"
    )
    args = ap.parse_args(list(argv))
    try:
        report = export_heldout(args.run, args.out, args.split)
    except (FileNotFoundError, ValueError) as exc:
        print(f"evr1-train export-heldout: error: {exc}", file=sys.stderr)
        return 2
    shown = ", ".join(f"{k} {n}" for k, n in report.kinds.items())
    print(f"wrote {report.rows} rows ({shown}) to {report.path}")
    print("evaluate them as trained:")
    for line in evaluation_commands(args.run, report.cache_dir, annotations=report.path.parent,
                                    media_root=report.media_root):  # fmt: skip
        print(f"  {line}")
    for line in report.failed[:10]:
        print(f"  not exported: {line}", file=sys.stderr)
    return 1 if report.failed else 0
