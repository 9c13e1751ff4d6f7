"""Built-in scorers, one module per problem type; importing this package registers them all."""

from evr1_rewards.scorers import (
    boolean,
    code,
    math,
    multiple_choice,
    numerical,
    ocr,
    open_ended,
    preference,
    regression,
    segmentation,
    spatial_grounding,
    spatiotemporal_grounding,
    temporal_grounding,
    tracking,
)

__all__ = [
    "boolean",
    "code",
    "math",
    "multiple_choice",
    "numerical",
    "ocr",
    "open_ended",
    "preference",
    "regression",
    "segmentation",
    "spatial_grounding",
    "spatiotemporal_grounding",
    "temporal_grounding",
    "tracking",
]
