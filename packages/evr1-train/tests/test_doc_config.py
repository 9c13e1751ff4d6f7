"""The docs run, training side: every `evr1-train` command of README.md and docs/*.md composes with the real config
(evr1-train's Hydra configs on verl's `ppo_trainer`), its subcommands' flags exist, and every config key quoted in the
docs or in the packages' docstrings, messages and comments is a key of some composed config (registry and extraction:
testenv/doc_commands.py; the light commands: tests/test_doc_commands.py)."""

from __future__ import annotations

import functools
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hydra", reason="needs evr1-train's config stack (nox -s train)")
pytest.importorskip("verl", reason="needs verl's ppo_trainer config (nox -s train)")

ROOT = Path(__file__).resolve().parents[3]
docs = runpy.run_path(str(ROOT / "testenv" / "doc_commands.py"))
COMMANDS = docs["all_commands"]()
CONF = ROOT / "packages" / "evr1-train" / "src" / "evr1_train" / "conf"


def compose_all(jobs: list[tuple[str, list[str]]]) -> list[Any]:
    """Compose each (config name, overrides) in one Hydra context (initialising it is the slow part); a job that
    fails gives its exception in its place."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    out: list[Any] = []
    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        for name, overrides in jobs:
            try:
                out.append(hydra_compose(name, overrides=overrides))
            except Exception as exc:
                out.append(exc)
    return out


def placeholder(override: str) -> str:
    """`+experiment=NAME` (an upper-case placeholder of the docs) -> the group's first preset."""
    key, _, value = override.partition("=")
    if not value.isupper():
        return override
    presets = sorted((CONF / key.lstrip("+")).glob("*.yaml"))
    assert presets, f"{override}: a placeholder for a group that does not exist"
    return f"{key}={presets[0].stem}"


def kind(cmd: Any) -> list[str]:
    return [r.kind for r in docs["rule_for"](cmd)]


def test_every_evr1_train_command_composes_with_the_real_config() -> None:
    from evr1_train.cli import _with_default_experiment

    train = [c for c in COMMANDS if kind(c) == ["hydra"]]
    assert len(train) >= 20
    jobs = []
    for cmd in train:
        words = cmd.argv[1:]
        name, words = ("evr1_sft", words[1:]) if words[:1] == ["sft"] else ("evr1_trainer", words)
        overrides = [placeholder(w) for w in words if "=" in w]
        jobs.append((name, _with_default_experiment(overrides) if name == "evr1_trainer" else overrides))
    problems = [
        f"{cmd.where}: {cmd.text}\n    {type(got).__name__}: {got}"
        for cmd, got in zip(train, compose_all(jobs), strict=True)
        if isinstance(got, Exception)
    ]
    assert not problems, "\n".join(problems)


def test_the_covered_commands_are_run_by_the_tests_named() -> None:
    for text, (where, line) in docs["COVERED"].items():
        test_file = ROOT / where
        assert test_file.is_file(), f"{text}: {where} does not exist"
        assert line in test_file.read_text(), f"{text}: {where} no longer holds {line!r}"


def test_every_evr1_train_subcommand_and_its_flags_exist() -> None:
    problems = []
    for cmd in (c for c in COMMANDS if kind(c) == ["cli"] and c.argv[0] == "evr1-train"):
        sub = cmd.argv[1]
        proc = subprocess.run([sys.executable, "-m", "evr1_train.cli", sub, "--help"], capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        if proc.returncode != 0:
            problems.append(f"{cmd.where}: evr1-train {sub} --help failed: {proc.stderr[-500:]}")
            continue
        problems += [f"{cmd.where}: evr1-train {sub} has no {f}" for f in cmd.flags() if f not in proc.stdout]
    assert not problems, "\n".join(problems)


def test_the_external_commands_name_modules_that_exist() -> None:
    import importlib.util

    assert importlib.util.find_spec("verl.model_merger") is not None
    external = [c for c in COMMANDS if kind(c) == ["external"]]
    assert {c.argv[0] for c in external} <= {"ray", "python", "pip"}


def test_the_viewer_demo_command_runs(tmp_path: Path) -> None:
    (cmd,) = [c for c in COMMANDS if kind(c) == ["module"]]
    proc = subprocess.run([sys.executable, *cmd.argv[1:-1], str(tmp_path / "demo")], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any((tmp_path / "demo").rglob("index.html"))


def _paths(node: Any, prefix: str = "") -> set[str]:
    from omegaconf import DictConfig

    out = set()
    if isinstance(node, DictConfig):
        for key in node.keys():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.add(path)
            out |= _paths(node._get_node(key), path)  # the node itself: interpolations are not resolved
    return out


@functools.cache
def known_keys() -> frozenset[str]:
    """Every key path of the base config, the quickstart experiments, each optional group on its own and the SFT
    configs. The model x algorithm experiments are the base plus an evr1_model, an evr1_algo and an evr1_hybrid preset,
    so composing those groups one by one finds the same keys (checked once: 56 composes, 29 here, the same set)."""
    jobs = [("evr1_trainer", ["engine=verl"]), ("evr1_trainer", ["engine=local"])]
    jobs += [
        ("evr1_trainer", [f"+experiment={p.stem}"]) for p in sorted((CONF / "experiment").glob("quickstart*.yaml"))
    ]
    for group in ("evr1_model", "evr1_algo", "evr1_hybrid", "evr1_lora"):
        jobs += [("evr1_trainer", [f"+{group}={p.stem}"]) for p in sorted((CONF / group).glob("*.yaml"))]
    jobs += [("evr1_sft", [f"+sft_experiment={p.stem}"]) for p in sorted((CONF / "sft_experiment").glob("*.yaml"))]
    configs = compose_all(jobs)
    failed = [(job, c) for job, c in zip(jobs, configs, strict=True) if isinstance(c, Exception)]
    assert not failed, failed
    return frozenset(set().union(*(_paths(c) for c in configs)))


def test_every_quoted_config_key_exists() -> None:
    """A quoted key exists in some composed config; one written with `+` (Hydra's append) does not exist yet, and its
    parent does."""
    keys = known_keys()
    assert {"trainer.total_training_steps", "evr1.hybrid.enable", "reward.custom_reward_function"} <= keys
    problems = []
    quoted = docs["quoted_keys"]()
    assert len(quoted) > 50
    not_keys = docs["NOT_CONFIG_KEYS"]
    stale = sorted(k for k in not_keys if k not in quoted or k in keys)
    assert not stale, f"NOT_CONFIG_KEYS entries quoted nowhere, or real keys after all: {stale}"
    for key, where in sorted(quoted.items()):
        if key in not_keys or docs["is_code_or_file"](key):
            continue
        if key.startswith("+"):
            bare = key[1:]
            parents = [bare.rsplit(".", i)[0] for i in range(1, bare.count("."))]
            if bare in keys or not any(p in keys for p in parents):
                problems.append(f"{where}: {key} (an appended key: it must not exist, a parent must)")
        elif key not in keys and not any(q == "+" + key or q.startswith(f"+{key}.") for q in quoted):  # appended
            problems.append(f"{where}: {key}")
    assert not problems, f"{len(problems)} quoted config keys that no composed config has:\n" + "\n".join(problems)
