"""`evr1-train view RUN/ [RUN2/ ...]`: rollout dumps -> the evr1 viewer (a static site, opens from the file system).

Per dumped step and prompt: the frames the model saw (read from the frame cache recorded in the dump's manifest),
the prompt, every response of the group with its extracted answer, reward components, advantage and whether it was
a stored (offline) or sampled (online) trajectory. The overview draws per-task reward and accuracy over the dumped
steps (online responses only: stored answers would flatter the policy), plus the per-step training reward and the
held-out accuracy per kind from the local engine's `metrics.jsonl` when the run folder has one. With two runs, the
second is shown side by side with the first (the same row at the same step).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from evr1_train.engine.tracking import read_jsonl
from evr1_train.rollouts.writer import SCHEMA, dumped_steps

_Field = TypeVar("_Field", list[Any], dict[str, Any])
_NOUNS = {list: "a list", dict: "an object"}  # a list or mapping field's type, as JSON names it

#: Key under which `read_dump` notes each record's file and line (named when the record is skipped).
WHERE = "_evr1_where"
#: What a malformed record raises while it is converted: it is skipped, named and counted, never fatal.
MALFORMED = (ValueError, TypeError, AttributeError, KeyError, OverflowError)

#: An accuracy reward at or above this counts the response as correct (1/0 rewards: 1; partial credit: half).
CORRECT_AT = 0.5
#: What a card shows when a dump has no usable prompt record.
PLAIN_PROMPT = "the dump's plain prompt text (an older evr1-train writes no record)"

EXAMPLES = """examples:
  evr1-train view runs/quickstart                      # writes runs/quickstart/viewer/index.html
  evr1-train view runs/grpo runs/grpo-hybrid --out site/   # second run side by side with the first
"""


def find_rollouts(run_dir: Path) -> Path:
    """The dump folder of a run: RUN/rollouts, or RUN itself when it holds the step files."""
    for cand in (run_dir / "rollouts", run_dir):
        if (cand / "manifest.json").is_file() or dumped_steps(cand):
            return cand
    raise FileNotFoundError(
        f"no rollout dumps in {run_dir} (expected {run_dir / 'rollouts'}/step-*.jsonl); enable them with "
        "evr1.rollout_dump.enable=true (every evr1.rollout_dump.every_n_steps steps)"
    )


def read_dump(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """(manifest, records in step order, problems). A bad line is reported and skipped, never fatal."""
    problems: list[str] = []
    manifest: dict[str, Any] = {}
    mpath = folder / "manifest.json"
    if mpath.is_file():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{mpath}: unreadable ({exc}); frames are looked up without it")
    records: list[dict[str, Any]] = []
    for step, path in dumped_steps(folder).items():
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                problems.append(f"{path.name}:{lineno}: not JSON ({exc}); line skipped")
                continue
            if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
                problems.append(f"{path.name}:{lineno}: not an {SCHEMA} record; skipped")
                continue
            rec.setdefault("step", step)
            rec[WHERE] = f"{path.name}:{lineno}"
            records.append(rec)
    if manifest.get("capped_at_step") is not None:
        problems.append(
            f"the dump reached evr1.rollout_dump.max_bytes at step {manifest['capped_at_step']}: later steps were "
            "not dumped (raise max_bytes or use on_cap=rotate)"
        )
    if manifest.get("rotated_out"):
        problems.append(f"{len(manifest['rotated_out'])} oldest dumped steps were rotated out by the size cap")
    return manifest, records, problems


def _media(rec: dict[str, Any], cache_dir: str | None) -> tuple[Any, ...]:
    from evr1_cache.viewer import MediaRef

    out = []
    for m in _field(rec.get("media"), "media", list):
        if not isinstance(m, dict):
            continue
        frames_from = m.get("frames_from")
        note = m.get("note")
        if frames_from == "decoded":
            note = note or "decoded on the fly (not in the frame cache): timestamps unknown, no thumbnails"
        elif frames_from == "inline":
            note = note or "image bytes inside the dataset row: not shown"
        out.append(
            MediaRef(
                kind="image" if m.get("kind") == "image" else "video",
                source=str(m.get("path") or ""),
                cache_root=cache_dir if m.get("cache_file") else None,
                cache_file=m.get("cache_file"),
                frame_indices=tuple(_index(i) for i in _field(m.get("frame_indices"), "frame_indices", list)),
                timestamps=tuple(float(t) for t in _field(m.get("timestamps"), "timestamps", list)),
                note=note,
                positions=tuple(_index(i) for i in _field(m.get("positions"), "positions", list)),  # a tool's frames
            )
        )
    return tuple(out)


def _response(r: dict[str, Any]) -> Any:
    from evr1_cache.viewer import ResponseRecord

    reward = {k: float(v) for k, v in _field(r.get("reward"), "reward", dict).items() if isinstance(v, (int, float))}
    acc = reward.get("accuracy")
    details = {str(k): str(v) for k, v in _field(r.get("details"), "details", dict).items()}
    if r.get("cut_chars"):
        details["cut"] = f"{r['cut_chars']} chars"
    return ResponseRecord(
        text=_text(r.get("text"), "text"),
        extracted=_text(r.get("extracted"), "extracted"),
        scores=reward,
        correct=None if acc is None else acc >= CORRECT_AT,
        source="offline" if r.get("offline") else "online",
        advantage=r.get("advantage") if isinstance(r.get("advantage"), (int, float)) else None,
        tokens=r.get("tokens") if isinstance(r.get("tokens"), int) else None,
        details=details,
    )


def _curves(records: Sequence[dict[str, Any]], metrics: Sequence[dict[str, Any]]) -> list[Any]:
    from evr1_cache.viewer import Curve

    acc: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        step = int(rec.get("step", 0))
        task = str(rec.get("task") or rec.get("problem_type") or "?")
        for r in rec.get("responses") or []:
            if not isinstance(r, dict) or r.get("offline"):
                continue
            reward = r.get("reward") or {}
            for metric, key in (
                ("reward (dumped steps, online)", "overall"),
                ("accuracy (dumped steps, online)", "accuracy"),
            ):
                v = reward.get(key)
                if isinstance(v, (int, float)):
                    for series in ("all", task):
                        acc[(metric, series)][step].append(float(v))
    curves = [
        Curve(metric=m, series=s, points=tuple((float(st), sum(v) / len(v)) for st, v in sorted(pts.items())))
        for (m, s), pts in sorted(acc.items())
    ]
    metrics = [m for m in metrics if isinstance(m.get("step"), (int, float))]  # a row without a usable step: unplotted
    train = [(float(m["step"]), m["critic/score/mean"]) for m in metrics
             if isinstance(m.get("critic/score/mean"), (int, float))]  # fmt: skip
    if train:
        curves.append(Curve(metric="training reward (every step)", series="all", points=tuple(train)))
    held: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for m in metrics:
        for k, v in m.items():
            if k.startswith("val/accuracy") and isinstance(v, (int, float)):
                held["all" if k == "val/accuracy" else k.rsplit("/", 1)[-1]].append((float(m["step"]), float(v)))
    curves += [Curve(metric="held-out accuracy", series=s, points=tuple(p)) for s, p in sorted(held.items())]
    return curves


def _sample(rec: dict[str, Any], cache: str | None) -> Any:
    """One dumped record as a viewer sample; raises one of MALFORMED when a field has the wrong type."""
    from evr1_cache.viewer import SampleRecord, shown_prompt

    step = _index(rec.get("step", 0))
    row_id = str(rec.get("row_id") or rec.get("uid") or "?")
    responses = _field(rec.get("responses"), "responses", list)
    system = rec.get("system") if isinstance(rec.get("system"), str) else None
    return SampleRecord(
        key=f"step{step}/{row_id}",
        label=row_id,
        benchmark=str(rec.get("data_source") or ""),
        task=str(rec.get("task") or ""),
        problem_type=str(rec.get("problem_type") or ""),
        **shown_prompt(rec.get("prompt_record"), str(rec.get("prompt") or ""), system, instead=PLAIN_PROMPT),
        ground_truth=str(rec.get("ground_truth") if rec.get("ground_truth") is not None else ""),
        media=_media(rec, cache),
        responses=tuple(_response(r) for r in responses if isinstance(r, dict)),
        step=step,
    )


def _index(value: Any) -> int:
    """A step or frame index: a non-negative integer (an integral float or digit string too), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a non-negative integer, got {type(value).__name__}")
    number = float(value)
    if number != int(number) or number < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return int(number)


def _field(value: Any, name: str, kind: type[_Field]) -> _Field:
    """`value` as a list or a mapping (None: empty); a field of another type is malformed."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise TypeError(f"`{name}` is a {type(value).__name__}, not {_NOUNS[kind]}")
    return value


def _text(value: Any, name: str) -> str | None:
    """A text field: a string or None; a number is shown as written, anything else is malformed."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"`{name}` is a {type(value).__name__}, not text")


def train_run_record(run_dir: Path, *, rollouts: Path | None = None, cache_dir: Path | None = None,
                     name: str | None = None) -> Any:  # fmt: skip
    """One training run's dumps as viewer records."""
    from evr1_cache.viewer import RunRecord

    folder = rollouts or find_rollouts(run_dir)
    manifest, records, problems = read_dump(folder)
    cache = str(cache_dir) if cache_dir else manifest.get("cache_dir")
    if cache and not Path(cache).is_dir():
        problems.append(f"frame cache {cache} not found: no thumbnails (pass --cache-dir)")
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    samples, good = [], []
    for rec in records:
        try:
            samples.append(_sample(rec, cache))
        except MALFORMED as exc:
            problem = f"{rec.get(WHERE, '?')}: malformed record ({type(exc).__name__}: {exc}); skipped"
            problems.append(problem)
            print(f"evr1-train view: warning: {folder}/{problem}", file=sys.stderr)
            continue
        good.append(rec)
    skipped = len(records) - len(good)
    steps = sorted({s.step for s in samples if s.step is not None})
    online = [r for s in samples for r in s.responses if r.source == "online"]
    summary: dict[str, float | int | str] = {"engine": str(manifest.get("engine") or "?")}
    if steps:
        last = [r for s in samples if s.step == steps[-1] for r in s.responses if r.source == "online"]
        summary[f"online correct verdicts @ step {steps[-1]} (share with accuracy reward >= {CORRECT_AT})"] = round(
            sum(bool(r.correct) for r in last) / max(1, len(last)), 3
        )
    summary["offline share"] = round(1 - len(online) / max(1, sum(len(s.responses) for s in samples)), 3)
    if skipped:
        summary["malformed records skipped"] = skipped
    return RunRecord(name=name or run_dir.resolve().name, kind="train", samples=samples,
                     curves=_curves(good, metrics), summary=summary, problems=tuple(problems),
                     source=str(folder))  # fmt: skip


def build_viewer(runs: Sequence[Path], out: Path, *, rollouts: Sequence[Path] | None = None,
                 cache_dir: Path | None = None, title: str = "evr1-train rollouts") -> Path:  # fmt: skip
    from evr1_cache.viewer import write_site

    records = []
    taken: set[str] = set()
    for i, run in enumerate(runs):
        name = run.resolve().name
        while name in taken:
            name += "'"
        taken.add(name)
        folder = rollouts[i] if rollouts and i < len(rollouts) else None
        records.append(train_run_record(run, rollouts=folder, cache_dir=cache_dir, name=name))
    return write_site(records, out, title=title).index


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="evr1-train view",
        description="Write the evr1 viewer (static HTML) for the rollout dumps of one or more training runs.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run output folders (holding rollouts/)")
    p.add_argument("--out", type=Path, default=None, help="site folder (default: FIRST_RUN/viewer)")
    p.add_argument("--cache-dir", type=Path, default=None, help="frame cache (default: the one the dump recorded)")
    p.add_argument("--title", default="evr1-train rollouts")
    args = p.parse_args(argv)
    try:
        out = args.out or args.runs[0] / "viewer"
        index = build_viewer(args.runs, out, cache_dir=args.cache_dir, title=args.title)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"evr1-train view: error: {exc}", file=sys.stderr)
        return 2
    print(index.resolve())
    return 0
