"""Metric sinks of the local engine: a JSONL log (always), TensorBoard and W&B (when installed and asked for).

Why JSONL first: it is what tests, benchmarks and the learning-curve plot read back, it survives a crash line by
line, and on resume the lines after the resumed step are dropped so the log never holds two different step 12s.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a metrics log (the engine's `metrics.jsonl`; [] when there is none); a torn last line (killed
    mid-write) or any other line that is not a JSON object is ignored."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            out.append(row)
    return out


class JsonlSink:
    """Appends one JSON object per call; `truncate_after(step)` makes a resumed run's log consistent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def truncate_after(self, step: int) -> None:
        from evr1_cache.atomic import atomic_text

        rows = [r for r in read_jsonl(self.path) if int(r.get("step", 0)) <= step]
        atomic_text(self.path, "".join(json.dumps(r) + "\n" for r in rows))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        row = {
            "step": step,
            **{k: (v if math.isfinite(v) else None) for k, v in metrics.items()},
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()

    def close(self) -> None:
        pass


class TensorBoardSink:
    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for k, v in metrics.items():
            if math.isfinite(v):
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, project: str, name: str, folder: Path, config: Mapping[str, Any]) -> None:
        import wandb

        self.run = wandb.init(project=project, name=name, dir=str(folder), config=dict(config), resume="allow")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class Tracker:
    """Fans metrics out to the sinks named in `loggers` that can be created here; says which were skipped and why."""

    def __init__(
        self,
        folder: Path,
        loggers: Iterable[str],
        *,
        project: str = "evr1",
        name: str = "local",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.jsonl = JsonlSink(folder / "metrics.jsonl")
        self.sinks: list[Any] = [self.jsonl]
        self.notes: list[str] = []
        wanted = set(loggers)
        if "tensorboard" in wanted:
            try:
                self.sinks.append(TensorBoardSink(folder / "tensorboard"))
            except ImportError:
                self.notes.append("tensorboard not installed: `pip install tensorboard` to get TensorBoard logs")
        if "wandb" in wanted:
            try:
                self.sinks.append(WandbSink(project, name, folder, config or {}))
            except Exception as exc:  # not installed, not logged in, offline ...
                self.notes.append(f"wandb disabled: {type(exc).__name__}: {exc}")
        for note in self.notes:
            logger.info(note)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for sink in self.sinks:
            try:
                sink.log(step, metrics)
            except Exception as exc:  # a logging backend must never stop training
                logger.warning("metrics sink %s failed: %s", type(sink).__name__, exc)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                pass
