"""The agent quickstart's control run: the same model, data and steps without tools, and the comparison table.

Why in the run itself: "the model learned to use the tool" is only shown by the accuracy it reaches against what the
same model reaches without tools at equal steps (the flash clips' overview never shows the answer, so the tool-less
run stays near chance). The control run reuses the first run's resolved inputs (data, frame cache, initial model:
the same tokenizer and weights) and writes its own folder, `<run>-no-tools`.

Names (stable): compare_without_tools, AgentComparison
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evr1_train.engine.config import plain

__all__ = ["AgentComparison", "compare_without_tools"]

COMPARISON_FILE = "agent_comparison.json"


@dataclass(frozen=True)
class AgentComparison:
    """Held-out accuracy with and without tools after the same steps, the tool-use rate, and the wall times."""

    steps: int
    accuracy_with_tools: float
    accuracy_without_tools: float
    tool_use_rate: float
    wall_s_with_tools: float
    wall_s_without_tools: float
    run_with_tools: str
    run_without_tools: str

    @property
    def gain(self) -> float:
        return self.accuracy_with_tools - self.accuracy_without_tools

    def table(self) -> str:
        def pct(x: float) -> str:
            return "  n/a" if math.isnan(x) else f"{x:.3f}"

        return "\n".join(
            [
                f"agent quickstart after {self.steps} steps     with tools   without tools",
                "-" * 68,
                f"{'held-out accuracy':<36}{pct(self.accuracy_with_tools):>10}{pct(self.accuracy_without_tools):>16}",
                f"{'tool-use rate (held-out)':<36}{pct(self.tool_use_rate):>10}{'-':>16}",
                f"{'wall time (min)':<36}{self.wall_s_with_tools / 60:>10.1f}{self.wall_s_without_tools / 60:>16.1f}",
                "-" * 68,
                f"accuracy gained by the tools: {self.gain:+.3f}",
            ]
        )


def control_config(cfg: Any, out: Path) -> Any:
    """`cfg` resolved, then: no tools, its own folder, the first run's inputs as they are (no quickstart set-up)."""
    from omegaconf import OmegaConf

    control = OmegaConf.create(plain(cfg))  # `plain` resolves the interpolations
    control.engine.output_dir = f"{str(out).rstrip('/')}-no-tools"
    control.engine.quickstart.enable = False
    control.engine.quickstart.compare_without_tools = False
    control.evr1.agent.tools = []
    control.trainer.experiment_name = f"{control.trainer.experiment_name}_no_tools"
    return control


def compare_without_tools(cfg: Any, summary: Any, run: Callable[[Any], Any]) -> AgentComparison:
    """Train the control run with `run` (`engine.local.run`, passed in: this module is below it), print the table
    and write `agent_comparison.json` into the first run's folder."""
    from evr1_cache.atomic import atomic_json

    out = Path(summary.output_dir)
    print(f"\n[evr1] the same model without tools, {summary.steps} steps (control run) ...", flush=True)
    control = run(control_config(cfg, out))
    result = AgentComparison(
        steps=int(summary.steps),
        accuracy_with_tools=float(summary.last_val.get("val/accuracy", float("nan"))),
        accuracy_without_tools=float(control.last_val.get("val/accuracy", float("nan"))),
        tool_use_rate=float(summary.last_val.get("val/agent/tool_use_rate", float("nan"))),
        wall_s_with_tools=float(summary.wall_s),
        wall_s_without_tools=float(control.wall_s),
        run_with_tools=str(out),
        run_without_tools=str(control.output_dir),
    )
    print("\n" + result.table(), flush=True)
    atomic_json(out / COMPARISON_FILE, {**asdict(result), "gain": result.gain})
    return result
