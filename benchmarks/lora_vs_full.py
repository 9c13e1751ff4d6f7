"""LoRA (peft) vs full fine-tuning on the quickstart task, from the same cold start.

Arms, identical except for what trains: `full` = experiment=quickstart (hybrid GRPO, every weight trained, as
shipped) and `lora` = experiment=quickstart_lora (LoRA adapters, the base weights frozen; see that preset for rank
and learning rate). Same data, seed, steps and evaluation. Each arm runs in its own process, so its peak RSS is its
own. Prints held-out accuracy per evaluation step, the final gap (target: LoRA within 0.05 of full fine-tuning at
the same step count), and memory three ways: the process's peak RSS; the RSS training added over the post-set-up
baseline in the same process (sampled every 5 ms); and, from one profiled step per arm (torch's profiler, live tensor
bytes), the step's peak of allocated tensors plus the tensors kept between steps (weights, gradients, AdamW moments,
and the reference model when the KL loss is on: a second copy for full fine-tuning, the adapter-free base for LoRA).
    python benchmarks/lora_vs_full.py --work runs/bench-lora --steps 300 --eval-every 20
    python benchmarks/lora_vs_full.py --work runs/bench-lora-quick --steps 60 --set engine.quickstart.data.n_train=96
A rerun with the same --work reuses finished arms (delete an arm's JSON to rerun it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _quickstart_arms import compose, curve, first_reaching, profile_arm, run_arm, table

MIB = 2**20


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
    ap.add_argument(
        "--profile-step",
        type=int,
        default=1,
        help="the step whose tensor memory is profiled (default 1: LoRA's B matrices start at zero, so both arms "
        "sample the same rollouts and update on the same batch)",
    )
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
    # memory profiles: one step each, profiled after two warm-up steps; `+kl` adds the KL loss, whose reference
    # policy is a second model copy for full fine-tuning and the adapter-free base model for LoRA
    kl = ["actor_rollout_ref.actor.use_kl_loss=true"]
    profiles = {
        "full": profile_arm("full.profile", args.work, "quickstart", common, inputs, args.profile_step),
        "lora": profile_arm("lora.profile", args.work, "quickstart_lora", common, inputs, args.profile_step),
        "full+kl": profile_arm("full_kl.profile", args.work, "quickstart", [*common, *kl], inputs, args.profile_step),
        "lora+kl": profile_arm(
            "lora_kl.profile", args.work, "quickstart_lora", [*common, *kl], inputs, args.profile_step
        ),
    }
    curves = {name: curve(r) for name, r in results.items()}
    print("\nheld-out accuracy per evaluation step")
    print(table(curves))
    end = {name: c[max(c)] for name, c in curves.items()}
    gap = end["full"] - end["lora"]
    print(f"\nfinal held-out accuracy: full {end['full']:.3f}, LoRA {end['lora']:.3f}, gap {gap:+.3f} "
          f"({'within' if gap <= 0.05 else 'outside'} the 0.05 target)")  # fmt: skip
    print("\nmemory of the training runs (RSS, GiB): the process's peak, after set-up, and what training added")
    print(f"{'arm':>6}{'peak RSS':>10}{'set-up':>9}{'added':>9}{'trainable':>12}{'total':>12}{'wall s':>9}{'>=50%':>7}")
    for name, r in results.items():
        print(
            f"{name:>6}{r['peak_rss_gb']:>10.3f}{r['baseline_rss_gb']:>9.3f}{r['train_rss_increase_gb']:>9.3f}"
            f"{r['trainable_params']:>12,}{r['total_params']:>12,}{r['wall_s']:>9.0f}"
            f"{first_reaching(curves[name], 0.5)!s:>7}"
        )
    print(f"\nmemory of one training step (step {args.profile_step}, torch profiler; MiB): the peak of live tensor bytes "
          "(what was alive at the step's start + the peak the step allocated), and the tensors kept after it")  # fmt: skip
    print(f"{'arm':>8}{'tensor peak':>13}{'step alloc':>12}{'weights':>9}{'grads':>8}{'optim':>8}{'ref':>8}{'kept':>8}")
    for name, p in profiles.items():
        k = p["state_bytes"]
        print(
            f"{name:>8}{p['tensor_peak_bytes'] / MIB:>13.2f}{p['step_tensor_peak_bytes'] / MIB:>12.2f}"
            f"{k['weights'] / MIB:>9.2f}{k['grads'] / MIB:>8.2f}{k['optimizer'] / MIB:>8.2f}{k['reference'] / MIB:>8.2f}"
            f"{sum(k.values()) / MIB:>8.2f}"
        )
    ratio = results["lora"]["peak_rss_gb"] / results["full"]["peak_rss_gb"]
    added = results["lora"]["train_rss_increase_gb"] / max(results["full"]["train_rss_increase_gb"], 1e-9)
    tensors = {n: p["tensor_peak_bytes"] for n, p in profiles.items()}
    print(f"\nLoRA / full: peak RSS {ratio:.2f}; RSS added by training {added:.2f}; training state (formula) "
          f"{state_bytes(results['lora']) / state_bytes(results['full']):.2f}; profiled tensor peak "
          f"{tensors['lora'] / tensors['full']:.2f}, with the KL loss {tensors['lora+kl'] / tensors['full+kl']:.2f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"curves": curves, "results": results, "profiles": profiles}, indent=1))


if __name__ == "__main__":
    main()
