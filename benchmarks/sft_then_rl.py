"""SFT warm start then RL, next to hybrid RL and pure RL, on the quickstart task from the same cold start.

Arms (same data, seed, evaluation; the step axis counts every optimiser step, SFT steps included):
  hybrid  experiment=quickstart: hybrid offline+online GRPO (k=1 of n=4 rollouts is the stored answer), --steps steps
  online  the same with evr1.hybrid.enable=false: pure on-policy GRPO, --steps steps
  sft     experiment=quickstart_sft: teacher forcing on the stored answers, --sft-steps steps
  sft+rl  experiment=quickstart_sft_rl: pure on-policy GRPO from the sft arm's checkpoint, --steps - --sft-steps
          steps (its curve starts where SFT ended)
Each arm runs in its own process. Prints held-out accuracy per evaluation step for every arm and the final values.
    python benchmarks/sft_then_rl.py --work runs/bench-sft --steps 300 --sft-steps 60 --eval-every 20
A rerun with the same --work reuses finished arms (delete an arm's JSON to rerun it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _quickstart_arms import compose, curve, first_reaching, run_arm, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (inputs are built once and reused)")
    ap.add_argument("--steps", type=int, default=300, help="total optimiser steps per arm (SFT + RL for sft+rl)")
    ap.add_argument("--sft-steps", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per arm")
    ap.add_argument("--set", action="append", default=[], help="extra Hydra override for every arm (repeatable)")
    ap.add_argument("--json", type=Path, help="write every curve here")
    args = ap.parse_args()
    if not 0 < args.sft_steps < args.steps:
        ap.error("--sft-steps must be between 0 and --steps")

    from evr1_train.engine.local import prepare_inputs

    common = [
        f"engine.num_threads={args.threads}",
        "engine.loggers=[jsonl]",
        "engine.quickstart.progress=false",
        "engine.resume=disable",
        f"trainer.test_freq={args.eval_every}",
        "trainer.save_freq=0",
        *args.set,
    ]
    args.work.mkdir(parents=True, exist_ok=True)
    inputs = args.work / "inputs"
    prepare_inputs(compose(inputs, common))
    rl = [*common, f"trainer.total_training_steps={args.steps}"]
    results = {
        "hybrid": run_arm("hybrid", args.work, "quickstart", rl, inputs),
        "online": run_arm("online", args.work, "quickstart", [*rl, "evr1.hybrid.enable=false"], inputs),
        "sft": run_arm(
            "sft", args.work, "quickstart_sft", [*common, f"trainer.total_training_steps={args.sft_steps}"], inputs
        ),
    }
    results["sft+rl"] = run_arm(
        "sft_rl",
        args.work,
        "quickstart_sft_rl",
        [
            *common,
            f"trainer.total_training_steps={args.steps - args.sft_steps}",
            f"actor_rollout_ref.model.path={args.work / 'sft'}",
        ],
        inputs,
    )
    curves = {
        "hybrid RL": curve(results["hybrid"]),
        "pure RL": curve(results["online"]),
        "SFT": curve(results["sft"]),
        "SFT -> RL": curve(results["sft+rl"], offset=args.sft_steps),
    }
    print("\nheld-out accuracy per evaluation step (SFT -> RL: RL steps counted after the SFT steps)")
    print(table(curves))
    print()
    for name, c in curves.items():
        print(f"{name:>10}: final {c[max(c)]:.3f} at step {max(c)}; first step >= 50%: {first_reaching(c, 0.5)}")
    walls = {name: r["wall_s"] for name, r in results.items()}
    print("wall seconds per arm:", {k: round(v) for k, v in walls.items()})
    if args.json:
        args.json.write_text(json.dumps({"curves": curves, "results": results}, indent=1))


if __name__ == "__main__":
    main()
