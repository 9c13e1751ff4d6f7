"""Shared by the quickstart comparison benchmarks: run one arm (an experiment preset + overrides) in a child process.

Why a child process per arm: peak memory (`ru_maxrss`) only grows within a process, so each arm's peak is measured
alone; and arms cannot leak state (RNG, caches) into each other. The child composes the config exactly as
`evr1-train +experiment=NAME OVERRIDES` would (Hydra), points it at shared quickstart inputs, runs the local engine
and writes its history, wall time, peak RSS and parameter counts as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def compose(out: Path, overrides: list[str], experiment: str = "quickstart") -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return hydra_compose(
            "evr1_trainer", overrides=[f"+experiment={experiment}", f"engine.output_dir={out}", *overrides]
        )


def run_arm(
    name: str,
    work: Path,
    experiment: str,
    overrides: list[str],
    inputs: Path | None = None,
    profile_step: int = 0,
) -> dict[str, Any]:
    """Run one arm in a child process; returns its result (also cached in work/<name>.json: a rerun reuses it).
    `profile_step` > 0: instead of the run, profile the memory of that step (`_profile`)."""
    result = work / f"{name}.json"
    if result.exists():
        return dict(json.loads(result.read_text()))
    spec = {
        "name": name,
        "work": str(work),
        "experiment": experiment,
        "overrides": overrides,
        "inputs": str(inputs or ""),
        "profile_step": profile_step,
    }
    subprocess.run([sys.executable, __file__, json.dumps(spec)], check=True)
    return dict(json.loads(result.read_text()))


def _child(spec: dict[str, Any]) -> None:
    from omegaconf import OmegaConf

    from evr1_train.engine.local import run

    work = Path(spec["work"])
    out = work / spec["name"]
    inputs = Path(spec["inputs"]) if spec["inputs"] else out
    cfg = compose(inputs, spec["overrides"], spec["experiment"])
    OmegaConf.resolve(cfg)  # data / cache / model-init paths of the shared inputs
    cfg.engine.output_dir = str(out)
    if spec.get("profile_step"):
        record = _profile(cfg, int(spec["profile_step"]))
    else:
        summary = run(cfg)
        record = {
            "history": summary.history,
            "wall_s": summary.wall_s,
            "peak_rss_gb": summary.peak_rss_gb,
            "baseline_rss_gb": summary.baseline_rss_gb,
            "train_peak_rss_gb": summary.train_peak_rss_gb,
            "train_rss_increase_gb": summary.train_rss_increase_gb,
            "state_bytes": summary.state_bytes,
            "total_params": summary.total_params,
            "trainable_params": summary.trainable_params,
            "output_dir": str(out),
        }
    (work / f"{spec['name']}.json").write_text(json.dumps(record, indent=1))


def _profile(cfg: Any, step: int) -> dict[str, Any]:
    """Build the arm's trainer, take `step - 1` steps, then profile step `step`: the peak of live tensor bytes during
    it (torch's profiler, allocation/free events) and the bytes kept between steps (weights, grads, optimizer moments,
    a separate reference model if any)."""
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.local import make_trainer
    from evr1_train.engine.memory import rss_bytes, state_bytes, tensor_peak

    trainer = make_trainer(LocalConfig.from_cfg(cfg))
    for _ in range(step - 1):
        trainer.step()

    def kept() -> dict[str, int]:
        out = state_bytes(trainer.model, trainer.optimizer)
        ref = getattr(trainer, "ref_model", None)
        out["reference"] = state_bytes(ref)["weights"] if ref is not None else 0
        return out

    before, rss = kept(), rss_bytes()
    _, peak = tensor_peak(trainer.step)
    return {
        "profile_step": step,
        "state_bytes_before": before,  # alive when the step starts (the step's peak comes on top of these)
        "state_bytes": kept(),  # kept after it: weights, gradients, optimizer moments, a reference copy
        "tensor_peak_bytes": sum(before.values()) + peak.peak,
        "step_tensor_peak_bytes": peak.peak,
        "step_tensor_net_bytes": peak.net,
        "memory_events": peak.events,
        "rss_before_step_gb": rss / 2**30,
        "total_params": trainer.parameters_report.total,
        "trainable_params": trainer.parameters_report.trainable,
    }


def profile_arm(
    name: str, work: Path, experiment: str, overrides: list[str], inputs: Path, step: int = 1
) -> dict[str, Any]:
    """`run_arm`'s memory profile: the child builds the arm, takes step-1 steps and profiles step `step`."""
    return run_arm(name, work, experiment, overrides, inputs, profile_step=step)


def curve(result: dict[str, Any], offset: int = 0) -> dict[int, float]:
    """{step: held-out accuracy} (steps shifted by `offset`, e.g. the SFT steps before RL)."""
    return {int(h["step"]) + offset: float(h["val/accuracy"]) for h in result["history"] if "val/accuracy" in h}


def first_reaching(points: dict[int, float], threshold: float) -> int | None:
    return next((s for s, v in sorted(points.items()) if v >= threshold), None)


def table(columns: dict[str, dict[int, float]]) -> str:
    """Held-out accuracy per evaluation step, one column per arm (blank where an arm did not evaluate)."""
    steps = sorted({s for c in columns.values() for s in c})
    head = f"{'step':>6}" + "".join(f"{name:>16}" for name in columns)
    rows = [head]
    for s in steps:
        rows.append(f"{s:>6}" + "".join(f"{c[s]:>16.3f}" if s in c else f"{'':>16}" for c in columns.values()))
    return "\n".join(rows)


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
