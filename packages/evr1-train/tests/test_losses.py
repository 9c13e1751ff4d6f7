"""`evr1_hybrid` policy loss on real tensors against verl's core_algos, and the loss wrapper around verl's ppo_loss."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.verl


def _actor_cfg(**kw):
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp", rollout_n=4, ppo_micro_batch_size_per_gpu=1, **kw)


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(4, 6, generator=g) * 2
    logp = (old + 0.1 * torch.randn(4, 6, generator=g)).clamp(max=-1e-3).requires_grad_(True)
    adv = torch.randn(4, 1, generator=g).expand(4, 6).contiguous()
    mask = torch.ones(4, 6)
    mask[1, 4:] = 0
    mask[3, 3:] = 0
    return old, logp, adv, mask


def test_registered_and_equal_to_verl_without_offline_tokens() -> None:
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    from evr1_train.hybrid import HybridConfig
    from evr1_train.losses import register_with_verl

    register_with_verl()
    fn = get_policy_loss_fn("evr1_hybrid")
    old, logp, adv, mask = _batch()
    cfg = _actor_cfg()
    ref, _ = get_policy_loss_fn("vanilla")(old, logp, adv, mask, "token-mean", cfg)
    hybrid = HybridConfig(enable=True, offline_handling="off_policy")
    got, metrics = fn(
        old, logp, adv, mask, "token-mean", cfg, offline_mask=torch.zeros(4, dtype=torch.bool), hybrid=hybrid
    )
    assert torch.allclose(got, ref)
    assert metrics["actor/evr1_offline_token_frac"] == 0.0
    on_policy = HybridConfig(enable=True, offline_handling="on_policy")  # offline tokens trained like sampled ones
    got2, _ = fn(
        old, logp, adv, mask, "token-mean", cfg, offline_mask=torch.ones(4, dtype=torch.bool), hybrid=on_policy
    )
    assert torch.allclose(got2, ref)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "token-sum"])
def test_offline_rows_get_the_shaping_loss_and_the_rest_verls(agg: str) -> None:
    """total = verl loss over online rows + shaping loss over offline rows, weighted as one batch."""
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn

    from evr1_train.hybrid import HybridConfig
    from evr1_train.losses import hybrid_policy_loss

    old, logp, adv, mask = _batch(1)
    cfg = _actor_cfg()
    off_rows = torch.tensor([False, True, False, True])
    hybrid = HybridConfig(enable=True, offline_handling="off_policy", shaping_gamma=0.1)
    got, metrics = hybrid_policy_loss(old, logp, adv, mask, agg, cfg, offline_mask=off_rows, hybrid=hybrid)

    on_mask = mask * (~off_rows).float().unsqueeze(-1)
    off_mask = mask * off_rows.float().unsqueeze(-1)
    p = logp.exp()
    off_mat = -adv * p / (p + 0.1)
    per_seq = agg.startswith("seq-mean")
    unit = (lambda m: (m.sum(-1) > 0).sum()) if per_seq else (lambda m: m.sum())
    on_loss, _ = get_policy_loss_fn("vanilla")(old, logp, adv, on_mask.bool(), agg, cfg)
    off_loss = agg_loss(off_mat, off_mask, agg)
    if agg == "token-sum":
        expected = on_loss + off_loss
    else:
        expected = on_loss * unit(on_mask) / unit(mask) + off_loss * unit(off_mask) / unit(mask)
    assert torch.allclose(got, expected, atol=1e-6)
    assert metrics["actor/evr1_offline_token_frac"] == pytest.approx(float(off_mask.sum() / mask.sum()))

    got.backward()
    # shaping gradient on an offline token: d/dlogp [-A p/(p+g)] = -A * g p / (p+g)^2; no clipping
    i, t = 1, 0
    pv = p[i, t].detach()
    scale = 1.0 if agg == "token-sum" else None
    if agg == "token-mean":
        scale = 1.0 / mask.sum()
    elif agg == "seq-mean-token-mean":
        scale = 1.0 / (mask[i].sum() * (mask.sum(-1) > 0).sum())
    elif agg == "seq-mean-token-sum":
        scale = 1.0 / (mask.sum(-1) > 0).sum()
    expected_grad = -adv[i, t] * 0.1 * pv / (pv + 0.1) ** 2 * scale
    assert torch.allclose(logp.grad[i, t], expected_grad, atol=1e-6)


def test_importance_method_caps_the_weight_but_keeps_the_gradient() -> None:
    from evr1_train.hybrid import HybridConfig
    from evr1_train.losses import offline_token_loss

    logp = torch.log(torch.tensor([[0.9, 0.05]])).requires_grad_(True)
    behaviour = torch.log(torch.tensor([[0.3, 0.5]]))
    adv = torch.ones(1, 2)
    h = HybridConfig(enable=True, offline_handling="off_policy", off_policy_method="importance", importance_max=2.0)
    loss = offline_token_loss(logp, adv, torch.tensor([True]), h, behaviour)
    assert torch.allclose(loss, torch.tensor([[-2.0, -0.1]]))  # ratio 3 capped at 2; 0.1 uncapped
    loss.sum().backward()
    assert torch.all(logp.grad != 0)


def _verl_batch(old, logp, adv, mask, offline):
    """A TensorDict laid out as verl's engine hands it to the loss: prompt+response, unpadded log-probs."""
    from verl.utils import tensordict_utils as tu

    b, r = mask.shape
    resp_lens = mask.sum(-1).long()
    flat = []
    for i in range(b):  # sequence = 2 prompt + n response tokens; the log-prob of response token j sits at 1 + j
        n = int(resp_lens[i])
        flat += [logp.new_zeros(1), logp[i, :n], logp.new_zeros(1)]
    values = torch.cat(flat)
    attention = torch.cat([torch.ones(b, 2), mask], dim=1).long()
    data = tu.get_tensordict(
        {
            "prompts": torch.ones(b, 2, dtype=torch.long),
            "responses": torch.ones(b, r, dtype=torch.long),
            "attention_mask": attention,
            "response_mask": mask,
            "old_log_probs": old,
            "advantages": adv,
            "evr1_offline": offline,
        },
        non_tensor_dict={"dp_size": 1, "batch_num_tokens": int(mask.sum()), "global_batch_size": b},
    )
    return data, {"log_probs": values}


def test_wrapper_runs_verls_ppo_loss_with_the_offline_marker() -> None:
    """evr1_ppo_loss -> verl's own ppo_loss -> registered evr1_hybrid, which sees the batch's `evr1_offline` marker."""
    from verl.workers.config import PolicyLossConfig
    from verl.workers.utils.losses import ppo_loss

    from evr1_train.hybrid import HybridConfig
    from evr1_train.losses import evr1_ppo_loss, hybrid_policy_loss, offline_mask_from, register_with_verl

    register_with_verl()
    old, logp, adv, mask = _batch(2)
    offline = torch.tensor([0, 1, 0, 0])
    data, out = _verl_batch(old, logp, adv, mask, offline)
    assert offline_mask_from(data).tolist() == [False, True, False, False]
    hybrid = HybridConfig(enable=True, offline_handling="off_policy")
    cfg = _actor_cfg(policy_loss=PolicyLossConfig(loss_mode="evr1_hybrid"))
    loss, metrics = evr1_ppo_loss(cfg, out, data, hybrid=hybrid)
    direct_cfg = _actor_cfg()
    direct_cfg.global_batch_info.update(dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=4)
    expected, _ = hybrid_policy_loss(
        old, logp, adv, mask, "token-mean", direct_cfg, offline_mask=offline, hybrid=hybrid
    )
    assert torch.allclose(loss, expected, atol=1e-6)
    assert "actor/pg_loss" in metrics
    # all-online marker: identical to verl's stock ppo_loss with the vanilla policy loss
    data0, out0 = _verl_batch(old, logp, adv, mask, torch.zeros(4, dtype=torch.long))
    ours, _ = evr1_ppo_loss(cfg, out0, data0, hybrid=hybrid)
    stock, _ = ppo_loss(_actor_cfg(), out0, data0)
    assert torch.allclose(ours, stock, atol=1e-6)
    # no marker while off-policy handling is on: a clear error, not a silent on-policy update
    data0.pop("evr1_offline")
    with pytest.raises(KeyError, match="evr1_offline"):
        evr1_ppo_loss(cfg, out0, data0, hybrid=hybrid)
