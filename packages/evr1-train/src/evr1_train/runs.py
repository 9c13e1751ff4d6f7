"""Which folder a run writes to, and whether an existing folder may be resumed.

Why: `evr1-train trainer.total_training_steps=100 algorithm.adv_estimator=rloo` after the plain quickstart must be a
new run with its own metrics, table and plot — not a resume of the old run's last checkpoint under a new title. So:
  * a variant's folder is named after the settings it changes: the preset's folder plus the run-changing command-line
    overrides (`runs/quickstart-adv_estimator=rloo,total_training_steps=100`), unless `engine.output_dir` is given;
  * every run records its settings (`run_settings.json`: the resolved config minus the keys that cannot change what
    is trained, `NEUTRAL`), and a folder whose checkpoints were made with different settings is not resumed: the run
    stops and names the keys that differ, unless resuming is forced (`engine.resume=true`) or switched off.

Names (stable): NEUTRAL, is_neutral(key), variant_name(overrides), run_settings(cfg), settings_diff(old, new),
check_resume(folder, settings, resume, has_checkpoint), write_settings(folder, settings), SETTINGS_FILE, RunSettingsError
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evr1_train.errors import ConfigError

SETTINGS_FILE = "run_settings.json"

#: Keys (and key prefixes) that cannot change what a run trains: how often it evaluates or saves, where and how it
#: logs, how many threads it uses, what it is called, and where its folders are.
NEUTRAL = (
    "hydra",
    "experiment",
    "trainer.test_freq",
    "trainer.save_freq",
    "trainer.val_before_train",
    "trainer.logger",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.default_local_dir",
    "trainer.resume_mode",
    "trainer.resume_from_path",
    "trainer.max_actor_ckpt_to_keep",
    "trainer.max_critic_ckpt_to_keep",
    "engine.loggers",
    "engine.plot",
    "engine.max_checkpoints",
    "engine.resume",
    "engine.output_dir",
    "engine.num_threads",
    "engine.return_freed_memory",
    "engine.val_batch_size",
    "engine.quickstart.progress",
    "engine.quickstart.root",
    "evr1.rollout_dump",
)
#: Last key components too generic to name a setting alone (`enable=false` -> `hybrid.enable=false`).
_GENERIC = {"enable", "mode", "k", "n", "name", "path", "type", "len", "metric", "coef", "kl_coef"}
_MAX_NAME = 80


class RunSettingsError(ConfigError):
    """A folder holds a run made with other settings; the message names them and the ways out."""


def is_neutral(key: str) -> bool:
    key = key.lstrip("+~")
    return any(key == n or key.startswith(n + ".") for n in NEUTRAL)


def _safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", value).strip("_") or "_"


def variant_name(overrides: Sequence[str]) -> str:
    """A folder-name suffix for the run-changing overrides (`""` when there are none), stable under reordering."""
    items: list[tuple[str, str]] = []
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or is_neutral(key):
            continue
        items.append((key[1:], "deleted") if key.startswith("~") else (key.lstrip("+"), value))
    if not items:
        return ""
    lasts = [k.rsplit(".", 1)[-1] for k, _ in items]
    parts = []
    for (key, value), last in zip(items, lasts, strict=True):
        short = last if last not in _GENERIC and lasts.count(last) == 1 else ".".join(key.split(".")[-2:])
        parts.append(f"{_safe(short)}={_safe(value)}")
    name = ",".join(sorted(parts))
    if len(name) > _MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}-{digest}"
    return name


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(node, Mapping):
        for k, v in node.items():
            key = f"{prefix}{k}"
            if is_neutral(key):
                continue
            if isinstance(v, Mapping) and v:
                out.update(_flatten(v, key + "."))
            else:
                out[key] = v
    return out


def run_settings(cfg: Any) -> dict[str, Any]:
    """The resolved config as `{dotted key: value}` without the `NEUTRAL` keys (JSON-able)."""
    from evr1_train.engine.config import plain

    flat: dict[str, Any] = json.loads(json.dumps(_flatten(plain(cfg)), default=str))
    return flat


def settings_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """`key: old -> new` for every key both records hold with different values (keys only one side knows — e.g.
    added by a newer verl — are not differences)."""
    return [f"{k}: {old[k]!r} -> {new[k]!r}" for k in sorted(set(old) & set(new)) if old[k] != new[k]]


def write_settings(folder: Path, settings: Mapping[str, Any]) -> None:
    from evr1_cache.atomic import atomic_json

    folder.mkdir(parents=True, exist_ok=True)
    atomic_json(folder / SETTINGS_FILE, {"format": 1, "settings": dict(settings)})


def check_resume(folder: Path, settings: Mapping[str, Any], resume: str, has_checkpoint: bool) -> list[str]:
    """Decide whether `folder`'s checkpoints may be resumed by a run with `settings`; returns the differences.

    resume="auto": refuse (RunSettingsError naming the keys) when the recorded settings differ; "true": resume
    anyway (the caller warns with the returned differences); "disable" (or no checkpoint): nothing to check.
    """
    path = folder / SETTINGS_FILE
    if resume == "disable" or not has_checkpoint or not path.exists():
        return []
    old = json.loads(path.read_text())
    if not isinstance(old, dict) or "settings" not in old:
        return []
    diff = settings_diff(dict(old["settings"]), settings)
    if diff and resume == "auto":
        shown = "\n  ".join(diff[:12]) + (f"\n  ... and {len(diff) - 12} more" if len(diff) > 12 else "")
        raise RunSettingsError(
            f"{folder} holds checkpoints of a run made with different settings:\n  {shown}\n"
            "Resuming would continue that run under the new settings. Choose one: a new folder "
            "(engine.output_dir=...), start over in this one (engine.resume=disable), or resume it anyway "
            "(engine.resume=true)."
        )
    return diff
