"""STVG (HC-STVG / VidSTG style spatio-temporal grounding; EasyVideoR1's 2,000-row file).

Official-style metrics: m_tIoU, m_vIoU, vIoU@0.3, vIoU@0.5 with the paper's vIoU (union denominator over per-second
box keys), not TubeDETR's min-end quirk and not EasyVideoR1's 0.5·tIoU + 0.5·mean box IoU over shared keys.
Rows whose ground truth has no boxes (71 in EasyVideoR1's file) only count in m_tIoU.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.scoring_rules import stvg_rule

BENCHMARK = register(
    Benchmark(
        name="stvg",
        title="STVG",
        problem_types=("spatial-temporal grounding",),
        scorer=stvg_rule,
        aggregator=aggregation.stvg,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
    )
)
