"""Hybrid offline+online GRPO vs pure on-policy GRPO from the same cold start, on the quickstart task.

Both arms use the same tiny random Qwen2.5-VL initialisation, the same data, seeds, steps and hyper-parameters
(experiment=quickstart); the only difference is `evr1.hybrid.enable` (k of the n rollouts of each group come from the
stored correct answer). Prints held-out accuracy per evaluation step for both, the gap at the end, and the first step
at which each reaches 50%. Runs on the local engine (CPU by default) in the workspace venv (`uv run` builds it):
    uv run python benchmarks/hybrid_vs_online.py --work runs/bench-hvo --steps 300 --eval-every 20 --seeds 0
    uv run python benchmarks/hybrid_vs_online.py --work runs/bench-hvo --steps 40 --set data.train_batch_size=8 \
        --set actor_rollout_ref.actor.ppo_mini_batch_size=8   # quicker (the mini-batch must divide the batch)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any


def compose(out: Path, overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return hydra_compose(
            "evr1_trainer", overrides=["+experiment=quickstart", f"engine.output_dir={out}", *overrides]
        )


def first_reaching(history: list[dict[str, float]], thr: float) -> int | None:
    return next((int(h["step"]) for h in history if h.get("val/accuracy", -1.0) >= thr), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (inputs are built once and reused)")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is fastest on a busy 2-core box)")
    ap.add_argument("--set", action="append", default=[], help="extra Hydra override for both arms (repeatable)")
    ap.add_argument("--json", type=Path, help="write all curves here")
    args = ap.parse_args()

    from omegaconf import OmegaConf

    from evr1_train.engine.local import prepare_inputs, run

    common = [f"engine.num_threads={args.threads}", "engine.loggers=[jsonl]", *args.set]
    inputs = args.work / "inputs"
    prepare_inputs(compose(inputs, common))
    results: dict[str, dict[int, list[dict[str, float]]]] = {"online": {}, "hybrid": {}}
    walls: dict[str, list[float]] = {"online": [], "hybrid": []}
    for seed in args.seeds:
        for arm in ("hybrid", "online"):
            cfg = compose(
                inputs,
                [
                    *common,
                    f"evr1.hybrid.enable={arm == 'hybrid'}",
                    f"engine.seed={seed}",
                    f"trainer.total_training_steps={args.steps}",
                    f"trainer.test_freq={args.eval_every}",
                    "trainer.save_freq=0",
                    "engine.resume=disable",
                ],
            )
            OmegaConf.resolve(cfg)
            cfg.engine.quickstart.enable = False
            cfg.engine.output_dir = str(args.work / f"{arm}-seed{seed}")
            t0 = time.perf_counter()
            summary = run(cfg)
            walls[arm].append(time.perf_counter() - t0)
            results[arm][seed] = summary.history

    print("\nheld-out accuracy (mean over seeds) per evaluation step")
    print(f"{'step':>6}{'on-policy':>12}{'hybrid':>12}{'gap':>10}")
    steps = sorted({int(h["step"]) for arm in results.values() for hist in arm.values() for h in hist})
    for st in steps:
        vals = {}
        for arm in ("online", "hybrid"):
            accs = [h["val/accuracy"] for hist in results[arm].values() for h in hist if int(h["step"]) == st]
            vals[arm] = sum(accs) / len(accs) if accs else math.nan
        print(f"{st:>6}{vals['online']:>12.3f}{vals['hybrid']:>12.3f}{vals['hybrid'] - vals['online']:>+10.3f}")
    for arm in ("online", "hybrid"):
        reach = [first_reaching(h, 0.5) for h in results[arm].values()]
        print(
            f"{arm:>8}: first step >= 50% held-out accuracy per seed: {reach}; wall per run {sum(walls[arm]) / len(walls[arm]):.0f} s"
        )
    if args.json:
        args.json.write_text(json.dumps({"curves": results, "walls": walls}, indent=1))


if __name__ == "__main__":
    main()
