"""`run(cfg)`: the single-process engine behind `evr1-train engine=local` (and the no-argument quickstart).

Order: (quickstart only) generate data -> build the frame cache -> build the tiny model; then train with progress
bar, JSONL/TensorBoard/W&B metrics, validation every `trainer.test_freq` steps, checkpoints every
`trainer.save_freq` steps (auto-resume from the newest), and finally a summary table and the learning-curve PNG.
"""

from __future__ import annotations

import logging
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_train.engine.config import LocalConfig, _get, plain

logger = logging.getLogger(__name__)

#: metrics shown on the progress bar (short name -> key)
BAR = {
    "reward": "critic/score/mean",
    "acc": "critic/accuracy/mean",
    "len": "response_length/mean",
    "s/it": "timing_s/step",
}


@dataclass
class RunSummary:
    """What a run did (returned by `run`, printed as the final table)."""

    output_dir: Path
    steps: int
    wall_s: float
    peak_rss_gb: float
    first_val: dict[str, float] = field(default_factory=dict)
    last_val: dict[str, float] = field(default_factory=dict)
    best_val_accuracy: float = float("nan")
    first_step_reaching: dict[str, int | None] = field(default_factory=dict)
    curve_png: Path | None = None
    history: list[dict[str, float]] = field(default_factory=list)

    def table(self) -> str:
        keys = sorted({k for k in (*self.first_val, *self.last_val) if k.startswith("val/accuracy")})
        lines = [f"{'held-out metric':<32}{'start':>10}{'end':>10}", "-" * 52]
        for k in keys:
            lines.append(
                f"{k:<32}{self.first_val.get(k, float('nan')):>10.3f}{self.last_val.get(k, float('nan')):>10.3f}"
            )
        lines.append("-" * 52)
        for thr, st in self.first_step_reaching.items():
            lines.append(f"first step with held-out accuracy >= {thr:<6}{'never' if st is None else st:>14}")
        lines.append(f"steps {self.steps}   wall {self.wall_s / 60:.1f} min   peak RSS {self.peak_rss_gb:.2f} GiB")
        if self.curve_png:
            lines.append(f"learning curve: {self.curve_png}")
        return "\n".join(lines)


def peak_rss_gb() -> float:
    """Peak resident memory of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**30 if sys.platform == "darwin" else 2**20)


def prepare_inputs(cfg: Any) -> None:
    """Quickstart: build data, cache and tiny model where the config's paths point (no-op for other experiments)."""
    qs = _get(cfg, "engine.quickstart")
    if not qs or not _get(qs, "enable", False):
        return
    from evr1_train.quickstart.dataset import QuickstartDataSpec
    from evr1_train.quickstart.model import TinyVLMSpec
    from evr1_train.quickstart.prepare import prepare_quickstart

    video = plain(_get(cfg, "data.evr1.video")) or {}
    image = plain(_get(cfg, "data.evr1.image")) or {}
    root = Path(str(_get(qs, "root")))
    t0 = time.perf_counter()
    print(f"[evr1] quickstart: preparing data, frame cache and tiny model under {root} ...", flush=True)
    prepared = prepare_quickstart(
        root,
        QuickstartDataSpec.from_mapping(plain(_get(qs, "data"))),
        TinyVLMSpec.from_mapping(plain(_get(qs, "model"))),
        video,
        image,
        progress=bool(_get(qs, "progress", True)),
    )
    expect = {
        "data.train_files": str(prepared.train_file),
        "data.val_files": str(prepared.val_file),
        "actor_rollout_ref.model.path": str(prepared.model_dir),
    }
    for key, value in expect.items():
        got = plain(_get(cfg, key))
        got = got[0] if isinstance(got, list) and len(got) == 1 else got
        if str(got) != value:
            raise ValueError(f"engine.quickstart: {key} is {got!r} but the quickstart wrote {value!r}; keep them equal")
    print(f"[evr1] quickstart inputs ready in {time.perf_counter() - t0:.1f} s", flush=True)


def _first_reaching(history: list[dict[str, float]], thresholds: tuple[float, ...]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for thr in thresholds:
        hit = next((int(h["step"]) for h in history if h.get("val/accuracy", -1) >= thr), None)
        out[f"{thr:.0%}"] = hit
    return out


def run(cfg: Any) -> RunSummary:
    """Train with the local engine as configured; returns the run summary (also printed)."""
    from tqdm.auto import tqdm

    from evr1_train.engine.checkpoint import latest_checkpoint, prune_checkpoints
    from evr1_train.engine.plot import curves_from_log, plot_curves
    from evr1_train.engine.tracking import Tracker, read_jsonl
    from evr1_train.engine.trainer import LocalTrainer

    prepare_inputs(cfg)
    lc = LocalConfig.from_cfg(cfg)
    out = Path(lc.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_root = out / "checkpoints"
    trainer = LocalTrainer(lc)
    print(
        f"[evr1] local engine on {trainer.runtime.label}: {len(trainer.train_rows)} train / {len(trainer.val_rows)} "
        f"held-out rows, {lc.adv_estimator} + {lc.loss_mode}, n={lc.n}, hybrid={'on' if trainer.hybrid.enable else 'off'}",
        flush=True,
    )
    if lc.resume != "disable":
        folder = latest_checkpoint(ckpt_root) if lc.resume == "auto" else Path(lc.resume)
        if folder is not None:
            trainer.load(folder)
            print(f"[evr1] resumed from {folder} (step {trainer.state.step})", flush=True)
    tracker = Tracker(
        out,
        lc.loggers,
        project=str(_get(cfg, "trainer.project_name", "evr1")),
        name=lc.experiment_name,
        config=plain(cfg) if not isinstance(cfg, dict) else cfg,
    )
    tracker.jsonl.truncate_after(trainer.state.step)
    from evr1_train.rollouts.engines import attach_local, finish_local

    dumps = attach_local(trainer, cfg, out)  # evr1.rollout_dump: drops dumps past the resumed step
    history = trainer.state.history
    t_start = time.perf_counter()
    wall_before = trainer.state.wall_s

    def validate() -> dict[str, float]:
        v = trainer.validate()
        if v:
            entry = {"step": float(trainer.state.step), **v}
            history.append(entry)
            tracker.log(trainer.state.step, v)
            per_kind = "  ".join(
                f"{k.rsplit('/', 1)[-1]}={x:.2f}" for k, x in v.items() if k.startswith("val/accuracy/")
            )
            tqdm.write(f"[evr1] step {trainer.state.step:>4} held-out accuracy {v['val/accuracy']:.3f}  ({per_kind})")
        return v

    if trainer.state.step == 0 and lc.val_before_train and trainer.val_rows:
        validate()
    bar = tqdm(total=lc.total_steps, initial=trainer.state.step, desc="evr1 local", unit="step", dynamic_ncols=True)
    try:
        while trainer.state.step < lc.total_steps:
            metrics = trainer.step()
            step = trainer.state.step
            tracker.log(step, metrics)
            bar.update(1)
            bar.set_postfix({k: f"{metrics.get(v, float('nan')):.3g}" for k, v in BAR.items()}, refresh=False)
            last = step == lc.total_steps
            if trainer.val_rows and ((lc.test_freq and step % lc.test_freq == 0) or last):
                validate()
            if (lc.save_freq and step % lc.save_freq == 0) or last:
                trainer.save(ckpt_root)
                prune_checkpoints(ckpt_root, lc.max_checkpoints)
    finally:
        bar.close()
        tracker.close()
    png = None
    if lc.plot:
        try:
            png = plot_curves(
                curves_from_log(read_jsonl(out / "metrics.jsonl")),
                out / "learning_curve.png",
                title=f"{lc.experiment_name}: {lc.adv_estimator}, hybrid={'on' if trainer.hybrid.enable else 'off'}",
            )
        except Exception as exc:  # the plot is a convenience; never fail a finished run over it
            logger.warning("learning-curve plot failed: %s", exc)
    summary = RunSummary(
        output_dir=out,
        steps=trainer.state.step,
        wall_s=wall_before + (time.perf_counter() - t_start),
        peak_rss_gb=peak_rss_gb(),
        first_val=dict(history[0]) if history else {},
        last_val=dict(history[-1]) if history else {},
        best_val_accuracy=max((h.get("val/accuracy", float("nan")) for h in history), default=float("nan")),
        first_step_reaching=_first_reaching(history, (0.5, 0.8)),
        curve_png=png,
        history=list(history),
    )
    print("\n" + summary.table(), flush=True)
    finish_local(dumps, out)  # the quickstart builds the rollout viewer and prints its path
    return summary
