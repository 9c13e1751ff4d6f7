"""The token and memory planner: exact prompt lengths per row before training, and the activations they cost.

    from evr1_cache.plan import plan_rows, histogram, over_limit, activation_memory, ModelShape
    plans = plan_rows(rows, "qwen3_vl", video_spec, image_spec, counter=load_text_counter("ckpt/"))
    print(histogram(plans, limit=16384)); bad = over_limit(plans, 16384)
    est = activation_memory(ModelShape.from_config("ckpt/"), seq_len=16384 + 1024, micro_batch=1, sp=4)

`evr1-cache plan` prints the same from the command line; `evr1-cache build --plan` drops or resamples the rows over
`--max-prompt-length` with a reason per row; evr1-train runs the same check at start-up (docs/plan.md).
Standard library only at import (transformers is imported only to load a tokenizer).
"""

from __future__ import annotations

from evr1_cache.plan.memory import PRESETS, MemoryEstimate, ModelShape, VisionShape, activation_memory
from evr1_cache.plan.report import ACTIONS, Decision, decide, histogram, over_limit, shrunk_specs, summary, write_report
from evr1_cache.plan.row_spec import PLAN_COLUMN, RowSpecError, has_row_spec, row_video_spec
from evr1_cache.plan.tokens import (
    HFTextCounter,
    MediaPlan,
    RowPlan,
    TextCounter,
    default_messages,
    load_text_counter,
    plan_row,
    plan_rows,
    row_media,
)

__all__ = [
    "ACTIONS",
    "PLAN_COLUMN",
    "PRESETS",
    "Decision",
    "HFTextCounter",
    "MediaPlan",
    "MemoryEstimate",
    "ModelShape",
    "RowPlan",
    "RowSpecError",
    "TextCounter",
    "VisionShape",
    "activation_memory",
    "decide",
    "default_messages",
    "has_row_spec",
    "histogram",
    "load_text_counter",
    "over_limit",
    "plan_row",
    "plan_rows",
    "row_media",
    "row_video_spec",
    "shrunk_specs",
    "summary",
    "write_report",
]
