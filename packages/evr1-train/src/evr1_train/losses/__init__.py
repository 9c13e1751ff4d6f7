"""Loss pieces: the `evr1_hybrid` off-policy token loss (verl policy-loss registry) and the dummy-vision helper.

Public API (stable): LOSS_NAME, hybrid_policy_loss, offline_token_loss, offline_context, register_with_verl,
evr1_ppo_loss, offline_mask_from, vision_zero_term, add_dummy_vision, needs_dummy.
Importing this package imports torch (not verl); verl is imported inside the functions that need it.
"""

from evr1_train.hybrid.config import LOSS_NAME
from evr1_train.losses.dummy_vision import add_dummy_vision, needs_dummy, vision_zero_term
from evr1_train.losses.offpolicy import (
    hybrid_policy_loss,
    offline_context,
    offline_token_loss,
    register_with_verl,
)
from evr1_train.losses.verl_loss import evr1_ppo_loss, offline_mask_from

__all__ = [
    "LOSS_NAME",
    "add_dummy_vision",
    "evr1_ppo_loss",
    "hybrid_policy_loss",
    "needs_dummy",
    "offline_context",
    "offline_mask_from",
    "offline_token_loss",
    "register_with_verl",
    "vision_zero_term",
]
