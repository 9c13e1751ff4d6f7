"""`evr1-train`: one Hydra app for both engines. `cfg.engine.name` picks verl (Ray cluster) or the local engine.

Examples:
    evr1-train                                   # quickstart: tiny model, generated videos, local engine
    evr1-train +experiment=qwen2_5_vl_7b_grpo data.train_files=train.jsonl data.val_files=val.jsonl \\
               data.evr1.cache_dir=cache/        # GRPO on verl
    evr1-train +experiment=qwen3_vl_8b_grpo_hybrid evr1.hybrid.mode=below_accuracy evr1.hybrid.accuracy_threshold=0.5
    evr1-train +experiment=NAME --cfg job        # print the composed config
    evr1-train --help                            # Hydra's help: config groups and options
    evr1-train view runs/quickstart              # the rollout viewer (static HTML) of a run's rollout dumps
    evr1-train parity --help                     # input parity: verl dataset vs transformers vs vLLM

Without an `experiment` and without `engine=...` the quickstart preset is added (`+experiment=quickstart`).
"""

from __future__ import annotations

import difflib
import sys
from typing import Any

ENGINES = ("local", "verl")


def _with_default_experiment(argv: list[str]) -> list[str]:
    """Add `+experiment=quickstart` when the command names neither an experiment nor an engine."""
    keys = {a.lstrip("+~").split("=", 1)[0] for a in argv if "=" in a}
    flags = {"--help", "-h", "--hydra-help", "--info", "-i", "--shell-completion", "-sc"}
    if "experiment" in keys or "engine" in keys or any(a in flags for a in argv):
        return argv
    # next to the other overrides: argparse refuses positionals split by an option (`a=b --cfg job +experiment=...`)
    at = next((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), len(argv))
    return [*argv[:at], "+experiment=quickstart", *argv[at:]]


def run(cfg: Any) -> Any:
    """Dispatch a composed config to its engine."""
    name = str(cfg.engine.name)
    if name == "local":
        from evr1_train.engine.local import run as run_local

        return run_local(cfg)
    if name == "verl":
        return run_verl(cfg)
    close = difflib.get_close_matches(name, ENGINES, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown engine.name {name!r}{hint} (known: {', '.join(ENGINES)})")


def run_verl(cfg: Any) -> None:
    """verl's own entry sequence (device, config validation, Ray + TaskRunner) on the evr1-prepared config."""
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from evr1_train.verl_config import prepare_verl_config

    prepare_verl_config(cfg)
    auto_set_device(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    if cfg.trainer.use_v1:
        run_ppo(cfg, task_runner_class=TaskRunnerV1)
    else:  # ReMax: verl 0.9.1 implements its greedy baseline only in the legacy trainer
        from verl.trainer.main_ppo_v0 import TaskRunner

        run_ppo(cfg, task_runner_class=TaskRunner)


def main() -> None:
    if sys.argv[1:2] == ["view"]:  # `evr1-train view RUN/`: the rollout viewer (not a Hydra run)
        from evr1_train.rollouts.view import main as view_main

        raise SystemExit(view_main(sys.argv[2:]))
    if sys.argv[1:2] == ["parity"]:  # not a Hydra run: `evr1-train parity --help`
        from evr1_train.parity.cli import main as parity_main

        raise SystemExit(parity_main(sys.argv[2:]))
    import hydra

    sys.argv = [sys.argv[0], *_with_default_experiment(sys.argv[1:])]

    @hydra.main(config_path="conf", config_name="evr1_trainer", version_base=None)
    def _app(cfg: Any) -> None:
        run(cfg)

    _app()


if __name__ == "__main__":
    main()
