"""`evr1-train`: one Hydra app for both engines, plus a few plain subcommands.

    evr1-train [OVERRIDE ...]            train: `cfg.engine.name` picks verl (Ray cluster) or the local engine
    evr1-train COMMAND [ARGS ...]        a registered subcommand (`evr1-train --help` lists them)

Without an `experiment` and without `engine=...` the quickstart preset is added (`+experiment=quickstart`).
`--help` prints a short usage built from the shipped config folders (no verl import, well under a second);
`--cfg job` prints the whole composed config and `--hydra-help` Hydra's own help.

Names (stable): main(argv=None) -> int, run(cfg, overrides=()), register_command(name, target, summary), COMMANDS
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module, resources
from typing import Any

from evr1_train.startup import ENGINES

HELP_FLAGS = ("-h", "--help")


@dataclass(frozen=True)
class Command:
    """A subcommand: `target` is "module:function", called with the remaining arguments; returns an exit code."""

    target: str
    summary: str

    def load(self) -> Callable[[Sequence[str]], int]:
        module, _, func = self.target.partition(":")
        fn: Callable[[Sequence[str]], int] = getattr(import_module(module), func)
        return fn


COMMANDS: dict[str, Command] = {}


def register_command(name: str, target: str, summary: str) -> None:
    """Add a subcommand; a second registration of the same name is refused (it would shadow the first)."""
    if name in COMMANDS:
        raise ValueError(f"evr1-train command {name!r} is already registered to {COMMANDS[name].target}")
    if "=" in name or name.startswith(("-", "+", "~")):
        raise ValueError(f"{name!r} cannot be a command name (it would read as a Hydra override or an option)")
    COMMANDS[name] = Command(target, summary)


for _command in (
    ("merge", "evr1_train.engine.merge:main", "merge a LoRA checkpoint into a full Hugging Face model folder"),
    ("sft", "evr1_train.verl_sft:main", "supervised warm start on verl's SFT trainer (torchrun, FSDP)"),
    ("view", "evr1_train.rollouts.view:main", "the rollout viewer (static HTML) of a run's rollout dumps"),
    ("parity", "evr1_train.parity.cli:main", "input parity of one row: verl dataset vs transformers vs vLLM (dumps)"),
    ("export-heldout", "evr1_train.export:main", "a run's held-out rows as a file evr1-eval scores (evr1_data)"),
):
    register_command(*_command)


def _with_default_experiment(argv: list[str]) -> list[str]:
    """Add `+experiment=quickstart` when the command names neither an experiment nor an engine."""
    keys = {a.lstrip("+~").split("=", 1)[0] for a in argv if "=" in a}
    flags = {"--help", "-h", "--hydra-help", "--info", "-i", "--shell-completion", "-sc"}
    if "experiment" in keys or "engine" in keys or any(a in flags for a in argv):
        return argv
    # next to the other overrides: argparse refuses positionals split by an option (`a=b --cfg job +experiment=...`)
    at = next((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), len(argv))
    return [*argv[:at], "+experiment=quickstart", *argv[at:]]


def run(cfg: Any, overrides: Sequence[str] = ()) -> Any:
    """Dispatch a composed config to its engine; `overrides` are the command line's (they name a variant's folder)."""
    name = str(cfg.engine.name)
    if name == "local":
        from evr1_train.engine.local import run as run_local

        return run_local(cfg, overrides=overrides)
    if name == "verl":
        return run_verl(cfg)
    from evr1_cache.registry import unknown_name

    raise ValueError(unknown_name("engine.name", name, ENGINES))


def run_verl(cfg: Any) -> None:
    """verl's own entry sequence (device, config validation, Ray + TaskRunner) on the evr1-prepared config."""
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from evr1_cache import check_model_path, resolve_model_path
    from evr1_train.verl_config import prepare_verl_config

    cfg.actor_rollout_ref.model.path = resolve_model_path(str(cfg.actor_rollout_ref.model.path))
    check_model_path(str(cfg.actor_rollout_ref.model.path), "actor_rollout_ref.model.path", adapter_ok=True)
    prepare_verl_config(cfg)
    check_verl_folder(cfg)
    auto_set_device(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    write_verl_protocol(cfg)
    if cfg.trainer.use_v1:
        run_ppo(cfg, task_runner_class=TaskRunnerV1)
    else:  # ReMax: verl 0.9.1 implements its greedy baseline only in the legacy trainer
        from verl.trainer.main_ppo_v0 import TaskRunner

        run_ppo(cfg, task_runner_class=TaskRunner)


def check_verl_folder(cfg: Any) -> None:
    """verl resumes `trainer.default_local_dir`'s newest `global_step_*` (resume_mode=auto): refuse when that folder's
    checkpoints were made with other settings (names them; `engine.resume=true` resumes anyway), then record ours."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from evr1_train.engine.config import _resume
    from evr1_train.runs import check_resume, run_settings, write_settings

    folder = Path(str(cfg.trainer.default_local_dir))
    settings = run_settings(cfg)
    if str(cfg.trainer.resume_mode) == "auto":
        resume = _resume(OmegaConf.select(cfg, "engine.resume", default="auto"))
        check_resume(folder, settings, resume, any(folder.glob("global_step_*")))
    write_settings(folder, settings)


def write_verl_protocol(cfg: Any) -> None:
    """The run folder's `evr1_train_protocol.json` (the evr1 trainer mode also writes one into every
    `global_step_N/`): how the model is prompted, shown frames and sampled, for evaluation to reproduce."""
    from pathlib import Path

    from evr1_cache import TRAIN_SETTINGS_FILE
    from evr1_cache.atomic import atomic_json
    from evr1_train.engine.protocol import verl_training_protocol

    folder = Path(str(cfg.trainer.default_local_dir))
    folder.mkdir(parents=True, exist_ok=True)
    atomic_json(folder / TRAIN_SETTINGS_FILE, verl_training_protocol(cfg).to_json())


# -- short help ---------------------------------------------------------------------------------------------------


def _group_names(group: str) -> list[str]:
    folder = resources.files("evr1_train.conf") / group
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _experiments_summary(names: list[str], models: list[str]) -> list[str]:
    """`quickstart, ...` then one `MODEL_{algo,...}[_hybrid]` line per model preset (the grid is regular)."""
    lines, rest = [], list(names)
    for model in models:
        mine = [n for n in names if n.startswith(model + "_")]
        algos = sorted({n[len(model) + 1 :].removesuffix("_hybrid") for n in mine})
        if algos:
            hybrid = "[_hybrid]" if any(n.endswith("_hybrid") for n in mine) else ""
            lines.append(f"{model}_{{{','.join(algos)}}}{hybrid}")
            rest = [n for n in rest if n not in mine]
    return [", ".join(rest), *lines] if rest else lines


def usage() -> str:
    """The `--help` text: groups and presets read from the shipped config folders, examples, commands."""
    width = 14
    groups = {g: _group_names(g) for g in ("engine", "evr1_model", "evr1_algo", "evr1_hybrid", "evr1_lora")}
    experiments = _experiments_summary(_group_names("experiment"), groups["evr1_model"])
    lines = [
        "usage: evr1-train [OVERRIDE ...] [--cfg job] [--hydra-help]",
        "       evr1-train COMMAND [ARG ...]",
        "",
        "Video RL with verifiable rewards on verl (engine=verl: Ray, FSDP, vLLM) or in one process (engine=local).",
        "With no arguments it runs the quickstart: a tiny Qwen-VL learns a generated video task on the CPU.",
        "",
        "Presets and groups (OVERRIDE = key=value, or +GROUP=NAME to add a preset):",
        f"  {'+experiment':<{width}}{experiments[0]}",
        *(f"  {'':<{width}}{line}" for line in experiments[1:]),
    ]
    for group, names in groups.items():
        label = group if group == "engine" else f"+{group}"  # a preset group is added with `+`
        if names:
            lines.append(f"  {label:<{width}}{', '.join(names)}")
    lines += [
        "",
        "Keys you will change most (verl's own names): data.train_files, data.val_files, data.evr1.cache_dir,",
        "  actor_rollout_ref.model.path, trainer.total_training_steps, trainer.experiment_name,",
        "  algorithm.adv_estimator, evr1.hybrid.enable, evr1.frozen_modules; local engine: engine.device,",
        "  engine.output_dir, engine.resume (auto | true | disable | a checkpoint folder).",
        "",
        "Examples:",
        "  evr1-train                                          # the quickstart (local engine, CPU, ~4 min)",
        "  evr1-train trainer.total_training_steps=100 algorithm.adv_estimator=rloo evr1.hybrid.enable=false",
        "  evr1-train +experiment=quickstart_lora              # the quickstart with LoRA (peft); then:",
        "  evr1-train merge runs/quickstart_lora               # a full model folder from its adapter",
        "  evr1-train +experiment=quickstart_sft               # SFT warm start on the stored answers, then",
        "  evr1-train +experiment=quickstart_sft_rl            # RL from that checkpoint",
        "  evr1-train +experiment=qwen2_5_vl_7b_grpo data.train_files=cache/train.evr1.jsonl \\",
        "      data.val_files=cache/val.evr1.jsonl data.evr1.cache_dir=cache/   # GRPO on verl",
        "  evr1-train +experiment=NAME --cfg job               # print the whole composed config",
        "  evr1-train view runs/quickstart                     # browse what the model saw and said (rollout dumps)",
        "  evr1-train export-heldout runs/quickstart runs/quickstart/heldout   # evaluate it: evr1-eval run --from-train",
        "",
        "Commands:",
        *(f"  {name:<{max(width, len(name) + 2)}}{cmd.summary}" for name, cmd in sorted(COMMANDS.items())),
        "",
        "Docs: docs/train.md (verl), docs/quickstart.md (local engine). Hydra's own help: evr1-train --hydra-help",
    ]
    return "\n".join(lines)


# -- entry point --------------------------------------------------------------------------------------------------


def _hydra_app(argv: list[str]) -> None:
    import hydra

    from evr1_train.errors import ConfigError
    from evr1_train.quiet import quiet_third_party
    from evr1_train.startup import check_overrides, check_values, searchpath_override

    quiet_third_party()
    args = _with_default_experiment(argv)
    try:  # a misspelt key or preset: refused here, in seconds, with the closest names (nothing is started)
        check_overrides(args)
    except ConfigError as exc:
        print(f"evr1-train: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if not any(a.startswith(("hydra.searchpath=", "+hydra.searchpath=")) for a in args):
        # verl's YAML read from disk (composing does not import verl), next to the other overrides (argparse refuses
        # positionals split by an option, and `--info` would take a trailing one as its value)
        at = next((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), 0)
        args.insert(at, searchpath_override())
    sys.argv = [sys.argv[0], *args]

    def _train(cfg: Any) -> None:
        from hydra.core.hydra_config import HydraConfig

        from evr1_cache import ModelPathError
        from evr1_train.errors import ConfigError

        try:
            check_values(cfg)
            run(cfg, overrides=list(HydraConfig.get().overrides.task))
        except (ConfigError, ModelPathError) as exc:  # a wrong setting: the message names it and the fix; no traceback
            print(f"evr1-train: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None

    app: Callable[[], None] = hydra.main(config_path="conf", config_name="evr1_trainer", version_base=None)(_train)
    app()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        return int(COMMANDS[args[0]].load()(args[1:]) or 0)
    if args and args[0] not in ("-", "--") and not args[0].startswith(("-", "+", "~")) and "=" not in args[0]:
        from evr1_cache.registry import close_names

        close = close_names(args[0], COMMANDS, n=1)
        hint = f"did you mean `evr1-train {close[0]}`? " if close else ""
        print(
            f"evr1-train: {args[0]!r} is neither a command nor a KEY=VALUE override; {hint}"
            f"commands: {', '.join(sorted(COMMANDS))} (evr1-train --help)",
            file=sys.stderr,
        )
        return 2
    if any(a in HELP_FLAGS for a in args):
        print(usage())
        return 0
    _hydra_app(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
