"""`HybridConfig`: how stored (offline) trajectories are mixed into the n rollouts of a group.

Why a frozen dataclass of its own: the verl path (agent loop, loss hook, metrics) and the local engine read the same
settings, so they must validate once, the same way, before any rollout runs.

Names (stable, used by the local engine):
    HybridConfig(enable, k, mode, accuracy_threshold, offline_handling, off_policy_method, shaping_gamma,
                 importance_max, overlong, base_loss_mode, output_key, flag_key)
    HybridConfig.from_mapping(mapping)   # from the `evr1.hybrid` YAML node (OmegaConf or dict)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from evr1_cache.registry import check_fields
from evr1_cache.spec import check_positive_float

Mode = Literal["always", "below_accuracy"]
Handling = Literal["on_policy", "off_policy"]
OffPolicyMethod = Literal["shaping", "importance"]
Overlong = Literal["truncate", "skip"]

#: The policy-loss name evr1's hybrid loss is registered under in verl (`actor.policy_loss.loss_mode`); here, in a
#: torch-free module, so the start-up check (evr1_train.startup) knows it without importing the loss.
LOSS_NAME = "evr1_hybrid"


@dataclass(frozen=True)
class HybridConfig:
    """Settings of hybrid offline+online RL (EasyVideoR1's "mix-policy", with its flaws fixed).

    enable: master switch; when False every rollout is generated online.
    k: how many of the n rollouts of a group come from the row's stored trajectory (1 <= k < n).
    mode: "always" replaces k slots of every group that has a stored trajectory; "below_accuracy" only when the
        mean accuracy of the group's online rollouts is below `accuracy_threshold` (the other slots then stay online).
    offline_handling: "on_policy" trains offline tokens exactly like sampled ones (EasyVideoR1's behaviour);
        "off_policy" gives them the loss of `off_policy_method`.
    off_policy_method: "shaping" = LUFFY's policy shaping, objective A * p / (p + shaping_gamma) with p = pi_theta(token)
        and no clipping; "importance" = A * min(pi_theta / pi_behaviour, importance_max) (behaviour log-probs from the
        row, or log 1 = 0 when absent, the LUFFY assumption).
    overlong: an offline trajectory longer than the response limit is "truncate"d (kept, cut, flagged) or "skip"ped
        (that slot is generated online instead); either way the reason is logged and counted.
    base_loss_mode: the verl policy loss (vanilla, gspo, cispo, ...) used for online tokens by the `evr1_hybrid` loss.
    output_key / flag_key: dataset columns holding the stored text and the has-trajectory flag (EasyVideoR1 schema).
    """

    enable: bool = False
    k: int = 1
    mode: Mode = "always"
    accuracy_threshold: float | None = None
    offline_handling: Handling = "on_policy"
    off_policy_method: OffPolicyMethod = "shaping"
    shaping_gamma: float = 0.1
    importance_max: float = 2.0
    overlong: Overlong = "truncate"
    base_loss_mode: str = "vanilla"
    output_key: str = "offline_output"
    flag_key: str = "has_offline_trajectory"

    def __post_init__(self) -> None:
        _choice("mode", self.mode, get_args(Mode))
        _choice("offline_handling", self.offline_handling, get_args(Handling))
        _choice("off_policy_method", self.off_policy_method, get_args(OffPolicyMethod))
        _choice("overlong", self.overlong, get_args(Overlong))
        if type(self.k) is not int or self.k < 1:  # YAML may hand over a float or a bool
            raise ValueError(f"evr1.hybrid.k must be an integer >= 1, got {self.k!r}")
        if self.mode == "below_accuracy":
            t = self.accuracy_threshold
            if t is None or not (0.0 <= float(t) <= 1.0):
                raise ValueError(
                    "evr1.hybrid.mode=below_accuracy needs evr1.hybrid.accuracy_threshold in [0, 1], "
                    f"got {t!r}; set e.g. evr1.hybrid.accuracy_threshold=0.5"
                )
        check_positive_float("evr1.hybrid", "shaping_gamma", self.shaping_gamma)
        check_positive_float("evr1.hybrid", "importance_max", self.importance_max)

    @property
    def off_policy(self) -> bool:
        return self.enable and self.offline_handling == "off_policy"

    def check_group_size(self, n: int) -> None:
        """A group needs at least one online rollout besides the k offline ones (GRPO compares within the group)."""
        if self.enable and not (1 <= self.k < n):
            raise ValueError(
                f"evr1.hybrid.k={self.k} offline rollouts need a group of n > k rollouts, got n={n}; "
                f"raise actor_rollout_ref.rollout.n or lower evr1.hybrid.k"
            )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> HybridConfig:
        """Build from a YAML node; unknown keys are an error that lists the known ones."""
        data = dict((mapping or {}).items())
        check_fields("evr1.hybrid", data, cls)
        if data.get("accuracy_threshold") is not None:
            data["accuracy_threshold"] = float(data["accuracy_threshold"])
        return cls(**data)


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"evr1.hybrid.{name} must be one of {list(allowed)}, got {value!r}")
