"""`run(cfg)`: the single-process engine behind `evr1-train engine=local` (and the no-argument quickstart).

Order: name the run folder (a variant of a preset gets its own, see `evr1_train.runs`) -> (quickstart only) generate
data, build the frame cache, build the tiny model -> check that the folder's checkpoints were made with the same
settings -> train with progress bar, JSONL/TensorBoard/W&B metrics, validation every `trainer.test_freq` steps,
checkpoints every `trainer.save_freq` steps (auto-resume from the newest), and finally a summary table and the
learning-curve PNG. The run folder also gets `run_settings.json` and `evr1_train_protocol.json`.
"""

from __future__ import annotations

import logging
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_train.engine.config import LocalConfig, _get, plain

logger = logging.getLogger(__name__)


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
    total_params: int = 0
    trainable_params: int = 0
    #: RSS after set-up (model, data, optimiser), the peak RSS while training, and their difference: what training
    #: itself added in this process (engine.memory.RssWatch); peak_rss_gb is the whole process's high-water mark
    baseline_rss_gb: float = 0.0
    train_peak_rss_gb: float = 0.0
    train_rss_increase_gb: float = 0.0
    #: bytes kept between steps at the end of the run: weights, grads, optimizer (engine.memory.state_bytes)
    state_bytes: dict[str, int] = field(default_factory=dict)

    def table(self) -> str:
        shown = ("val/accuracy", "val/agent/tool_use_rate")
        keys = sorted({k for k in (*self.first_val, *self.last_val) if k.startswith(shown)})
        lines = [f"{'held-out metric':<32}{'start':>10}{'end':>10}", "-" * 52]
        for k in keys:
            lines.append(
                f"{k:<32}{self.first_val.get(k, float('nan')):>10.3f}{self.last_val.get(k, float('nan')):>10.3f}"
            )
        lines.append("-" * 52)
        for thr, st in self.first_step_reaching.items():
            lines.append(f"first step with held-out accuracy >= {thr:<6}{'never' if st is None else st:>14}")
        lines.append(f"steps {self.steps}   wall {self.wall_s / 60:.1f} min   peak RSS {self.peak_rss_gb:.2f} GiB")
        if self.train_peak_rss_gb:
            lines.append(
                f"memory: {self.baseline_rss_gb:.2f} GiB after set-up, training added {self.train_rss_increase_gb:.3f} "
                f"GiB at its peak; kept between steps {sum(self.state_bytes.values()) / 2**20:.1f} MiB "
                "(weights + grads + optimizer)"
            )
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
    spec = TinyVLMSpec.from_mapping(plain(_get(qs, "model")))
    extra: tuple[str, ...] = ()
    if _get(cfg, "engine.agent", False):  # every prompt holds the tools' instructions: the tokenizer learns them
        from evr1_train.engine.agent import AgentSettings, tool_instructions

        extra = (tool_instructions(AgentSettings.from_mapping(plain(_get(cfg, "evr1.agent"))), spec.arch),)
    t0 = time.perf_counter()
    print(f"[evr1] quickstart: preparing data, frame cache and tiny model under {root} ...", flush=True)
    prepared = prepare_quickstart(
        root,
        QuickstartDataSpec.from_mapping(plain(_get(qs, "data"))),
        spec,
        video,
        image,
        progress=bool(_get(qs, "progress", True)),
        build_model=bool(_get(qs, "build_model", True)),
        extra_corpus=extra,
    )
    expect = {"data.train_files": str(prepared.train_file), "data.val_files": str(prepared.val_file)}
    if prepared.model_dir is not None:
        expect["actor_rollout_ref.model.path"] = str(prepared.model_dir)
    for key, value in expect.items():
        got = plain(_get(cfg, key))
        got = got[0] if isinstance(got, list) and len(got) == 1 else got
        if str(got) != value:
            raise ValueError(f"engine.quickstart: {key} is {got!r} but the quickstart wrote {value!r}; keep them equal")
    print(f"[evr1] quickstart inputs ready in {time.perf_counter() - t0:.1f} s", flush=True)


def name_output_dir(cfg: Any, overrides: Sequence[str]) -> str:
    """The run folder: `engine.output_dir` as given, or — for a variant of a preset (run-changing overrides on the
    command line, no `engine.output_dir=` among them) — the preset's folder plus the variant's name."""
    from evr1_train.runs import variant_name

    base = str(_get(cfg, "engine.output_dir", "runs/local"))
    explicit = any(o.lstrip("+").split("=", 1)[0] == "engine.output_dir" for o in overrides)
    variant = "" if explicit else variant_name(overrides)
    if variant:
        base = f"{base.rstrip('/')}-{variant}"
        cfg["engine"]["output_dir"] = base  # item access: OmegaConf nodes (struct mode included) and plain dicts
    return base


def _resume_folder(lc: LocalConfig, ckpt_root: Path, cfg: Any) -> Path | None:
    """The checkpoint to resume (None: start fresh), after checking it was made with this run's settings."""
    from evr1_train.engine.checkpoint import latest_checkpoint
    from evr1_train.runs import check_resume, run_settings, write_settings

    out = Path(lc.output_dir)
    settings = run_settings(cfg)
    folder = None
    if lc.resume not in ("auto", "true", "disable"):
        folder = Path(lc.resume)
    elif lc.resume != "disable":
        folder = latest_checkpoint(ckpt_root)
    if lc.resume in ("auto", "true"):
        diff = check_resume(out, settings, lc.resume, folder is not None)
        if diff:
            logger.warning("resuming %s although its settings differ (engine.resume=true): %s", out, "; ".join(diff))
    write_settings(out, settings)
    return folder


def run(cfg: Any, overrides: Sequence[str] = ()) -> RunSummary:
    """Train with the local engine as configured; returns the run summary (also printed).

    `overrides`: the command line's Hydra overrides (the CLI passes them); a preset variant gets its own folder.
    """
    from evr1_cache.atomic import atomic_json
    from evr1_train.engine.tracking import Tracker
    from evr1_train.quiet import quiet_third_party

    quiet_third_party()
    name_output_dir(cfg, overrides)
    prepare_inputs(cfg)
    lc = LocalConfig.from_cfg(cfg)
    out = Path(lc.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"[evr1] run folder: {out}", flush=True)
    resume_from = _resume_folder(lc, out / "checkpoints", cfg)
    trainer = make_trainer(lc)
    print(f"[evr1] {trainer.describe()}", flush=True)
    print(f"[evr1] {trainer.parameters_line()}", flush=True)
    for name, data in trainer.checkpoint_files().items():  # the run folder describes itself like its checkpoints
        atomic_json(out / name, data)
    if resume_from is not None:
        trainer.load(resume_from)
        print(f"[evr1] resumed from {resume_from} (step {trainer.state.step})", flush=True)
    tracker = Tracker(
        out,
        lc.loggers,
        project=str(_get(cfg, "trainer.project_name", "evr1")),
        name=lc.experiment_name,
        config=plain(cfg) if not isinstance(cfg, dict) else cfg,
    )
    tracker.jsonl.truncate_after(trainer.state.step)
    from evr1_train.rollouts.engines import attach_local, finish_local

    dumps = attach_local(trainer, cfg, out) if hasattr(trainer, "on_rollout") else None  # evr1.rollout_dump
    from evr1_train.engine.memory import GIB, RssWatch, state_bytes

    t_start, wall_before = time.perf_counter(), trainer.state.wall_s
    watch = RssWatch().start()
    try:
        _train_loop(trainer, lc, tracker, out / "checkpoints")
    finally:
        watch.stop()
        tracker.close()
    history = trainer.state.history
    summary = RunSummary(
        output_dir=out,
        steps=trainer.state.step,
        wall_s=wall_before + (time.perf_counter() - t_start),
        peak_rss_gb=peak_rss_gb(),
        first_val=dict(history[0]) if history else {},
        last_val=dict(history[-1]) if history else {},
        best_val_accuracy=max((h.get("val/accuracy", float("nan")) for h in history), default=float("nan")),
        first_step_reaching={
            f"{thr:.0%}": next((int(h["step"]) for h in history if h.get("val/accuracy", -1) >= thr), None)
            for thr in (0.5, 0.8)
        },
        curve_png=_plot(out, lc, trainer.describe_short()) if lc.plot else None,
        history=list(history),
        total_params=trainer.parameters_report.total,
        trainable_params=trainer.parameters_report.trainable,
        baseline_rss_gb=watch.baseline / GIB,
        train_peak_rss_gb=watch.peak / GIB,
        train_rss_increase_gb=watch.increase / GIB,
        state_bytes=state_bytes(trainer.model, trainer.optimizer),
    )
    print("\n" + summary.table(), flush=True)
    finish_local(dumps, out)  # the quickstart builds the rollout viewer and prints its path
    if lc.agent and _get(cfg, "engine.quickstart.compare_without_tools", False):
        from evr1_train.engine.compare import compare_without_tools

        compare_without_tools(cfg, summary, run)
    if lc.val_files:
        from evr1_train.export import evaluation_commands

        cache_dir = _get(cfg, "data.evr1.cache_dir")
        # the trainer's media root: its own setting, else the training file's folder (DataOptions' default)
        media_root = _get(cfg, "data.evr1.media_root") or str(Path(str(lc.train_files[0])).parent)
        lines = evaluation_commands(out, None if cache_dir is None else str(cache_dir), media_root=str(media_root))
        print("\nevaluate this run on its held-out rows, as it was trained:", *(f"  {c}" for c in lines), sep="\n")
    return summary


def make_trainer(lc: LocalConfig) -> Any:
    """The trainer for `lc`: the RL trainer, the supervised warm start when `evr1.sft.enable`, or the multi-turn
    agent trainer when `engine.agent`."""
    if lc.sft:
        from evr1_train.engine.sft import SFTTrainer

        return SFTTrainer(lc)
    if lc.agent:
        from evr1_train.engine.agent_trainer import AgentTrainer

        return AgentTrainer(lc)
    from evr1_train.engine.trainer import LocalTrainer

    return LocalTrainer(lc)


def _validate(trainer: Any, tracker: Any) -> None:
    """Held-out evaluation: appended to the trainer's history, logged, and printed per question kind."""
    from tqdm.auto import tqdm

    v = trainer.validate()
    if not v:
        return
    trainer.state.history.append({"step": float(trainer.state.step), **v})
    tracker.log(trainer.state.step, v)
    per_kind = "  ".join(f"{k.rsplit('/', 1)[-1]}={x:.2f}" for k, x in v.items() if k.startswith("val/accuracy/"))
    tqdm.write(f"[evr1] step {trainer.state.step:>4} held-out accuracy {v['val/accuracy']:.3f}  ({per_kind})")


def _train_loop(trainer: Any, lc: LocalConfig, tracker: Any, ckpt_root: Path) -> None:
    """Steps until `total_steps`, with a progress bar, validation every `test_freq` and checkpoints every `save_freq`
    (and both at the last step)."""
    from tqdm.auto import tqdm

    from evr1_train.engine.checkpoint import prune_checkpoints

    if trainer.state.step == 0 and lc.val_before_train and trainer.val_rows:
        _validate(trainer, tracker)
    bar = tqdm(total=lc.total_steps, initial=trainer.state.step, desc="evr1 local", unit="step", dynamic_ncols=True)
    try:
        while trainer.state.step < lc.total_steps:
            metrics = trainer.step()
            step = trainer.state.step
            tracker.log(step, metrics)
            bar.update(1)
            bar.set_postfix({k: f"{metrics.get(v, float('nan')):.3g}" for k, v in trainer.bar.items()}, refresh=False)
            last = step == lc.total_steps
            if trainer.val_rows and ((lc.test_freq and step % lc.test_freq == 0) or last):
                _validate(trainer, tracker)
            if (lc.save_freq and step % lc.save_freq == 0) or last:
                trainer.save(ckpt_root)
                prune_checkpoints(ckpt_root, lc.max_checkpoints)
    finally:
        bar.close()


def _plot(out: Path, lc: LocalConfig, what: str) -> Path | None:
    """learning_curve.png from the run's metrics log (a convenience: a failure is a warning, never an error)."""
    from evr1_train.engine.plot import curves_from_log, plot_curves
    from evr1_train.engine.tracking import read_jsonl

    try:
        return plot_curves(
            curves_from_log(read_jsonl(out / "metrics.jsonl")),
            out / "learning_curve.png",
            title=f"{lc.experiment_name}: {what}",
        )
    except Exception as exc:
        logger.warning("learning-curve plot failed: %s", exc)
        return None
