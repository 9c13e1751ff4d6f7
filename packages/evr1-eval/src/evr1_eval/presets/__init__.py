"""Model-family evaluation presets: `get_preset("qwen3_vl_official")`; importing this package registers them all.

One module per family; a new family adds a module that calls `register(Preset(...))` and one import line below.
"""

from evr1_eval.presets import qwen2_5_vl, qwen3_vl  # noqa: F401  (each import registers its presets)
from evr1_eval.presets.registry import (
    RESPONSE_FILTERS,
    Preset,
    ResponseFilter,
    Source,
    apply_response_filter,
    available_presets,
    get_preset,
    register,
)

__all__ = [
    "RESPONSE_FILTERS",
    "Preset",
    "ResponseFilter",
    "Source",
    "apply_response_filter",
    "available_presets",
    "get_preset",
    "register",
]
