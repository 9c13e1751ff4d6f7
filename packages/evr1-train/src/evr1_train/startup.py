"""Start-up checks of an `evr1-train` command line: unknown keys and enumerated values refused in seconds, before any work.

Why: Hydra answers a misspelt key with "To append to your config use +KEY=VALUE", and following that advice starts a
full run with the key ignored; a misspelt advantage estimator passes composition and fails minutes later inside verl.
Here every override's key is looked up in the config composed from the presets alone (so a `+KEY` that adds a key
nothing reads is found too), and `+KEY` may add keys only under a documented extension point (`EXTENSION_POINTS`).
Enumerated values are checked against the registries the run uses. verl is never imported (that alone takes 15-20 s):
its config folder is located on disk and its estimator registry read from its source (`verl_adv_estimators`).

Names (stable): ENGINES, EXTENSION_POINTS, verl_config_dir(), searchpath_override(), check_overrides(argv, config_name),
    check_values(cfg), verl_adv_estimators(), verl_policy_losses(), config_keys(cfg)
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_train.errors import ConfigError

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

#: `engine.name`: which trainer runs the recipe (conf/engine/<name>.yaml).
ENGINES = ("local", "verl")

#: Config nodes whose keys are free (passed on as keyword arguments), where `+KEY=VALUE` may add a key
#: (docs/train.md "Adding keys"). Everywhere else a key must already exist in evr1's or verl's config.
EXTENSION_POINTS: tuple[str, ...] = (
    "reward.custom_reward_function.reward_kwargs",  # keyword arguments of evr1_rewards' compute_score
    "reward.reward_kwargs",  # verl's reward manager (e.g. DAPO's overlong_buffer_cfg)
    "ray_kwargs.ray_init",  # ray.init(...)
    "actor_rollout_ref.model.override_config",  # Hugging Face model config fields
    "critic.model.override_config",
    "actor_rollout_ref.rollout.engine_kwargs",  # vLLM / SGLang engine arguments
    "data.mm_processor_kwargs",  # the HF processor's call
    "data.apply_chat_template_kwargs",  # the chat template's call
    "data.evr1.video",  # evr1_cache.spec.SamplingSpec fields (e.g. family); checked by check_values
    "data.evr1.image",  # evr1_cache.spec.ImageSpec fields
    "evr1.agent",  # evr1_train.engine.agent.AgentSettings fields (checked when the agent loop reads them)
)

#: Hydra's options that choose another primary config: the checks here are then left to Hydra.
_OTHER_CONFIG = ("--config-name", "-cn", "--config-path", "-cp")
#: Hydra's option that adds a config folder (presets of one's own): searched here too.
_CONFIG_DIR = ("--config-dir", "-cd")


def verl_config_dir() -> Path:
    """verl's `trainer/config` folder, found without importing verl (its `__init__` imports torch, ray, ...)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("verl is not installed: evr1-train's config extends verl's (pip install evr1-train pulls it)")
    return Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"


def searchpath_override(extra: Sequence[Path] = ()) -> str:
    """The Hydra override that reads verl's YAML from disk (`file://`) instead of `pkg://` (which imports verl);
    `extra`: more config folders (`--config-dir`)."""
    paths = ", ".join(f"'file://{p.as_posix()}'" for p in (verl_config_dir(), *extra))
    return f"hydra.searchpath=[{paths}]"


def _config_dirs(argv: Sequence[str]) -> list[Path]:
    """The folders given with `--config-dir DIR` / `--config-dir=DIR` / `-cd DIR`."""
    dirs = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in _CONFIG_DIR:
            folder = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if folder:
                dirs.append(Path(folder).absolute())
    return dirs


def config_keys(node: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key of an OmegaConf tree, nodes and leaves (interpolations are not resolved)."""
    from omegaconf import DictConfig

    if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
        return
    for key in node:
        path = f"{prefix}{key}"
        yield path
        yield from config_keys(node._get_node(key), path + ".")


def _node_at(cfg: Any, key: str) -> Any:
    """The node of dotted `key` ("": `cfg` itself), None when the config has no such key."""
    from omegaconf import DictConfig

    node = cfg
    for part in key.split(".") if key else ():
        if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
            return None
        if part not in list(node):  # not `part in node`: OmegaConf answers False for a key whose value is ???
            return None
        node = node._get_node(part)
    return node


def _target_keys(cfg: Any, key: str) -> list[str]:
    """The dotted keys of the fields of the dataclass that `key`'s parent node's `_target_` names (verl builds e.g.
    its `RolloutConfig` from the node, so `+actor_rollout_ref.rollout.enable_sleep_mode=False` sets a real field that
    the YAML leaves out); read from verl's source, without importing it."""
    from omegaconf import DictConfig

    parent = key.rpartition(".")[0]
    node = _node_at(cfg, parent)
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    fields = _dataclass_fields(target) if isinstance(target, str) else frozenset()
    return sorted(f"{parent}.{f}" if parent else f for f in fields)


@lru_cache(maxsize=64)
def _dataclass_fields(target: str) -> frozenset[str]:
    """The annotated fields of the class `target` names (`verl.a.b.Class`) and of its bases found beside it."""
    module, _, name = target.rpartition(".")
    if not module.startswith("verl."):
        return frozenset()
    package = verl_config_dir().parent.parent.joinpath(*module.split(".")[1:])
    files = sorted(package.glob("*.py")) if package.is_dir() else [package.with_suffix(".py")]
    classes: dict[str, ast.ClassDef] = {}
    for file in files:
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        classes.update({n.name: n for n in tree.body if isinstance(n, ast.ClassDef)})
    found: set[str] = set()
    todo, seen = [name], set()
    while todo:
        cls = classes.get(todo.pop())
        if cls is None or cls.name in seen:
            continue
        seen.add(cls.name)
        found.update(a.target.id for a in cls.body if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name))
        todo.extend(b.id for b in cls.bases if isinstance(b, ast.Name))
    return frozenset(f for f in found if not f.startswith("_"))


def suggest(key: str, known: Sequence[str], n: int = 3) -> list[str]:
    """The closest valid dotted keys: whole paths first, else keys whose last part is close to `key`'s last part."""
    close = difflib.get_close_matches(key, known, n=n, cutoff=0.75)
    if close:
        return close
    leaf = key.rsplit(".", 1)[-1]
    by_leaf: dict[str, list[str]] = {}
    for path in known:
        by_leaf.setdefault(path.rsplit(".", 1)[-1], []).append(path)
    leaves = difflib.get_close_matches(leaf, list(by_leaf), n=n, cutoff=0.8)
    return [path for name in leaves for path in by_leaf[name]][:n]


def _did_you_mean(key: str, known: Sequence[str]) -> str:
    close = suggest(key, known)
    return f"; did you mean {' or '.join(close)}?" if close else " (no similar key; `evr1-train --cfg job` lists them)"


def _compose(overrides: Sequence[str], config_name: str = "evr1_trainer", extra: Sequence[Path] = ()) -> Any:
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    try:
        with initialize_config_module(config_module="evr1_train.conf", version_base=None):
            return compose(config_name, overrides=[*overrides, searchpath_override(extra)])
    except HydraException as exc:  # a preset or group typo: Hydra's message lists the available options
        raise ConfigError(str(exc).split("\nConfig search path:")[0].strip()) from None


def check_overrides(argv: Sequence[str], config_name: str = "evr1_trainer") -> None:
    """Refuse, with the closest valid names, every override whose key no part of the config has.

    `argv` is the command line as Hydra will see it; `config_name` the primary config (`evr1_sft` for `sft`). The
    config is composed from its group overrides alone (presets, `engine=...`, with the `--config-dir` folders), then
    each value override is looked up there: `KEY=V` and `~KEY` need an existing key, `+KEY=V` / `++KEY=V` a new key
    under an `EXTENSION_POINTS` node. Every problem is reported at once.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a.split("=", 1)[0] in _OTHER_CONFIG or a.lstrip("+").startswith("hydra.searchpath") for a in argv):
        return  # another primary config or search path: Hydra's own checks
    lines = [a for a in argv if not a.startswith("-") and ("=" in a or a.startswith("~"))]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except HydraException as exc:
        raise ConfigError(str(exc).strip()) from None
    extra = _config_dirs(argv)
    roots = [Path(str(resources.files("evr1_train.conf"))), verl_config_dir(), *extra]
    groups: list[Override] = []
    values: list[Override] = []
    for ov in parsed:
        key = ov.key_or_group
        if key == "hydra" or key.startswith(("hydra.", "hydra/")):
            continue
        # a config-group override (`+experiment=NAME`, `engine=verl`, `data@data=...`), or a value
        (groups if ov.package is not None or any((r / key).is_dir() for r in roots) else values).append(ov)
    if not values and not groups:
        return
    missing = [p for p in (_missing_option(ov, roots) for ov in groups) if p]
    if missing:
        raise ConfigError("\n  ".join(["unknown preset(s); nothing was started:", *missing]))
    # a preset typo fails here, listing the presets
    base = _compose([ov.input_line for ov in groups], config_name, extra)
    known = sorted(config_keys(base))
    problems = [p for p in (_problem(ov, base, known) for ov in values) if p]
    if problems:
        raise ConfigError("\n  ".join(["unknown config key(s); nothing was started:", *problems]))


def _missing_option(ov: Override, roots: Sequence[Path]) -> str | None:
    """A group override naming an option no config folder has (`+experiment=quickstrat`), with the closest names."""
    value = ov.value()
    if ov.package is not None or ov.is_delete() or not isinstance(value, str):
        return None  # packaged, deleted or swept groups: Hydra's own checks
    group = ov.key_or_group
    if any((root / group / f"{value}.yaml").is_file() for root in roots):  # nested options (`a/b`) included
        return None
    options = sorted({f.stem for root in roots if (root / group).is_dir() for f in (root / group).glob("*.yaml")})
    close = difflib.get_close_matches(value, options, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"`{ov.input_line}`: no {group} named {value}; {hint}(available: {', '.join(options)})"


def _problem(ov: Override, base: Any, known: Sequence[str]) -> str | None:
    key, line = ov.key_or_group, ov.input_line
    exists = _node_at(base, key) is not None
    point = next((p for p in EXTENSION_POINTS if key == p or key.startswith(p + ".")), None)  # the one it is under
    if ov.is_add() or ov.is_force_add():
        fields = _target_keys(base, key)
        if exists or point or key in fields:  # `+` on an existing key: Hydra's own message says to drop the `+`
            return None
        points = ", ".join(EXTENSION_POINTS)
        hint = _did_you_mean(key, [*known, *fields])
        return f"`{line}` adds {key}, which nothing reads{hint} (`+` adds keys only under: {points})"
    if exists:
        return None
    if point:
        return f"`{line}`: {key} is not set yet; {point} takes new keys with a `+`: `+{line}`"
    return f"`{line}`: no key {key}{_did_you_mean(key, known)}"


# -- enumerated values -------------------------------------------------------------------------------------------


def _enum_values(tree: ast.Module, name: str) -> dict[str, str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                t.id: stmt.value.value
                for stmt in node.body
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
                for t in stmt.targets
                if isinstance(t, ast.Name) and isinstance(stmt.value.value, str)
            }
    return {}


def _registered(tree: ast.Module, decorator: str, enum: dict[str, str]) -> set[str]:
    """Names passed to `@decorator("name")` or `@decorator(Enum.MEMBER)` on the module's functions."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id == decorator):
                continue
            arg = deco.args[0] if deco.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            elif isinstance(arg, ast.Attribute) and arg.attr in enum:
                names.add(enum[arg.attr])
    return names


def _core_algos_registry(decorator: str, enum: str, registry: str) -> set[str]:
    """The names `@decorator(...)` registers in `verl/trainer/ppo/core_algos.py` (`enum`: the class whose members
    may name them), read from the source; should it ever be unreadable this way, the imported `registry` itself."""
    source = verl_config_dir().parent / "ppo" / "core_algos.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        names = _registered(tree, decorator, _enum_values(tree, enum))
    except (OSError, SyntaxError):
        names = set()
    if not names:  # pragma: no cover - a verl whose source is not laid out as 0.9.x: ask the registry itself
        from verl.trainer.ppo import core_algos

        names = set(vars(core_algos)[registry])
    return names


@lru_cache(maxsize=1)
def verl_adv_estimators() -> tuple[str, ...]:
    """The names in verl's `ADV_ESTIMATOR_REGISTRY` (filled by `@register_adv_est(...)` decorators), read without
    importing verl; a test checks that this reading equals the imported registry."""
    return tuple(sorted(_core_algos_registry("register_adv_est", "AdvantageEstimator", "ADV_ESTIMATOR_REGISTRY")))


@lru_cache(maxsize=1)
def verl_policy_losses() -> tuple[str, ...]:
    """The names in verl's `POLICY_LOSS_REGISTRY` (`@register_policy_loss("name")`), plus the loss evr1 registers
    there (`evr1_hybrid`)."""
    from evr1_train.hybrid.config import LOSS_NAME

    return tuple(sorted({*_core_algos_registry("register_policy_loss", "", "POLICY_LOSS_REGISTRY"), LOSS_NAME}))


def _one_of(key: str, value: str, valid: Sequence[str]) -> None:
    if value in valid:
        return
    close = difflib.get_close_matches(value, list(valid), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise ConfigError(f"{key}={value} is not a known name; {hint}valid: {', '.join(valid)}")


def check_values(cfg: Any) -> None:
    """Enumerated settings checked against the registries the run uses, each error listing the valid names:
    `engine.name`, `algorithm.adv_estimator` (verl's registry; the local engine's exceptions),
    `actor_rollout_ref.actor.policy_loss.loss_mode` (verl's loss registry and evr1's), `data.evr1` (video
    source, model families and budgets through `evr1_cache.spec`)."""
    from omegaconf import OmegaConf

    from evr1_train.data.options import DataOptions

    engine = str(OmegaConf.select(cfg, "engine.name", default="local"))
    _one_of("engine.name", engine, ENGINES)
    estimator = OmegaConf.select(cfg, "algorithm.adv_estimator", default=None)
    if estimator is not None:
        _one_of("algorithm.adv_estimator", str(estimator), verl_adv_estimators())
    if engine == "local":
        from evr1_train.engine.config import UNSUPPORTED_ESTIMATORS

        if str(estimator) in UNSUPPORTED_ESTIMATORS:
            raise ConfigError(
                f"algorithm.adv_estimator={estimator} is not available in the local engine: "
                f"{UNSUPPORTED_ESTIMATORS[str(estimator)]}"
            )
    loss_mode = OmegaConf.select(cfg, "actor_rollout_ref.actor.policy_loss.loss_mode", default=None)
    if loss_mode is not None:
        _one_of("actor_rollout_ref.actor.policy_loss.loss_mode", str(loss_mode), verl_policy_losses())
    node = OmegaConf.select(cfg, "data.evr1", default=None)
    if node is None:
        return
    try:
        opts = DataOptions.from_mapping(node)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check_spec("data.evr1.video", opts.video, opts.video_spec)
    _check_spec("data.evr1.image", opts.image, opts.image_spec)


def _check_spec(key: str, given: Mapping[str, Any], build: Callable[[], object]) -> None:
    """A `data.evr1.video` / `.image` node: its keys are the spec dataclass's fields; the spec checks the values."""
    from evr1_cache.spec import ImageSpec, SamplingSpec

    spec_cls = SamplingSpec if key.endswith("video") else ImageSpec
    valid = [f.name for f in fields(spec_cls)]
    for name in given:
        if name not in valid:
            close = difflib.get_close_matches(str(name), valid, n=1)
            hint = f"did you mean {key}.{close[0]}? " if close else ""
            raise ConfigError(f"{key}.{name} is not a setting of {spec_cls.__name__}; {hint}valid: {', '.join(valid)}")
    try:
        build()
    except (ValueError, KeyError) as exc:  # evr1_cache: a family's KeyError lists the known families
        raise ConfigError(f"{key}: {str(exc).strip(chr(34))}") from None
