"""LoRA (peft) vs full fine-tuning on the quickstart task, from the same cold start.

Arms, identical except for what trains: `full` = experiment=quickstart (hybrid GRPO, every weight trained, as
shipped) and `lora` = experiment=quickstart_lora (LoRA adapters, the base weights frozen; see that preset for rank
and learning rate). Same data, seed, steps and evaluation. Each arm runs in its own process, so its peak RSS is its
own. Prints held-out accuracy per evaluation step, the final gap (target: LoRA within 0.05 of full fine-tuning at
the same step count), peak RSS, trainable parameters and the fp32 training state (weights + gradients + AdamW
moments) of each arm.
    python benchmarks/lora_vs_full.py --work runs/bench-lora --steps 300 --eval-every 20
    python benchmarks/lora_vs_full.py --work runs/bench-lora-quick --steps 60 --set engine.quickstart.data.n_train=96
A rerun with the same --work reuses finished arms (delete an arm's JSON to rerun it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _quickstart_arms import compose, curve, first_reaching, run_arm, table


def state_bytes(result: dict) -> int:
    """fp32 weights of the whole model + gradient and two AdamW moments per trainable weight."""
    return 4 * (int(result["total_params"]) + 3 * int(result["trainable_params"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (inputs are built once and reused)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per arm")
    ap.add_argument("--set", action="append", default=[], help="extra Hydra override for both arms (repeatable)")
    ap.add_argument("--json", type=Path, help="write both curves and figures here")
    args = ap.parse_args()

    from evr1_train.engine.local import prepare_inputs

    common = [
        f"engine.num_threads={args.threads}",
        "engine.loggers=[jsonl]",
        "engine.quickstart.progress=false",
        "engine.resume=disable",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.test_freq={args.eval_every}",
        "trainer.save_freq=0",
        *args.set,
    ]
    args.work.mkdir(parents=True, exist_ok=True)
    inputs = args.work / "inputs"
    prepare_inputs(compose(inputs, common))
    results = {
        "full": run_arm("full", args.work, "quickstart", common, inputs),
        "lora": run_arm("lora", args.work, "quickstart_lora", common, inputs),
    }
    curves = {name: curve(r) for name, r in results.items()}
    print("\nheld-out accuracy per evaluation step")
    print(table(curves))
    end = {name: c[max(c)] for name, c in curves.items()}
    gap = end["full"] - end["lora"]
    print(f"\nfinal held-out accuracy: full {end['full']:.3f}, LoRA {end['lora']:.3f}, gap {gap:+.3f} "
          f"({'within' if gap <= 0.05 else 'outside'} the 0.05 target)")  # fmt: skip
    print(
        f"{'arm':>6}{'peak RSS GiB':>14}{'trainable':>12}{'total':>12}{'fp32 state MiB':>16}{'wall s':>9}{'>=50%':>7}"
    )
    for name, r in results.items():
        print(
            f"{name:>6}{r['peak_rss_gb']:>14.2f}{r['trainable_params']:>12,}{r['total_params']:>12,}"
            f"{state_bytes(r) / 2**20:>16.1f}{r['wall_s']:>9.0f}{first_reaching(curves[name], 0.5)!s:>7}"
        )
    ratio = results["lora"]["peak_rss_gb"] / results["full"]["peak_rss_gb"]
    print(f"peak RSS ratio LoRA / full: {ratio:.2f}; training-state ratio: "
          f"{state_bytes(results['lora']) / state_bytes(results['full']):.2f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"curves": curves, "results": results}, indent=1))


if __name__ == "__main__":
    main()
