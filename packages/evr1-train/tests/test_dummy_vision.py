"""Mixed image/video/text micro-batches: the vision tower takes part with exactly zero gradient (tiny Qwen2.5-VL)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.verl


@pytest.fixture(scope="module")
def model(tiny_vl):
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    return AutoModelForImageTextToText.from_pretrained(tiny_vl, torch_dtype=torch.float32).train()


def _text_loss(model, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def test_zero_term_touches_every_vision_parameter_with_zero_gradient(model) -> None:
    from evr1_train.losses import needs_dummy, vision_zero_term

    ids = torch.randint(10, 200, (2, 12))
    model.zero_grad(set_to_none=True)
    plain = _text_loss(model, ids)
    plain.backward()
    visual = model.model.visual
    assert all(p.grad is None for p in visual.parameters())  # the situation that hangs FSDP on other ranks
    grads_text = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model.zero_grad(set_to_none=True)
    assert needs_dummy(None, None)
    assert not needs_dummy(torch.zeros(1), None)
    term = vision_zero_term(model)
    loss = _text_loss(model, ids) + term
    assert term.item() == 0.0
    assert torch.equal(loss.detach(), plain.detach())
    loss.backward()
    for name, p in visual.named_parameters():
        assert p.grad is not None, f"{name} did not take part"
        assert torch.count_nonzero(p.grad) == 0, f"{name} got a non-zero gradient"
    for name, g in grads_text.items():  # the language model's update is unchanged
        assert torch.allclose(model.get_parameter(name).grad, g), name


def test_verl_text_only_branch_bug_and_evr1_shim(model) -> None:
    """verl 0.9.1's text-only dummy pass breaks on transformers >= 5 (ModelOutput); evr1's shim fixes that branch."""
    import verl.models.transformers.qwen2_vl as qv

    from evr1_train.verl_hooks.compat import patch_qwen2_vl_text_only

    ids = torch.randint(10, 200, (1, 8))
    stock = getattr(qv._get_input_embeds, "__wrapped__", qv._get_input_embeds)
    with pytest.raises(AttributeError, match="mean"):  # if verl fixes this, the shim disables itself (version guard)
        stock(model.model, ids)
    patch_qwen2_vl_text_only()
    assert getattr(qv._get_input_embeds, "__evr1_compat__", False)
    model.zero_grad(set_to_none=True)
    embeds, _ = qv._get_input_embeds(model.model, ids)
    assert torch.equal(embeds.detach(), model.get_input_embeddings()(ids).detach())
    embeds.sum().backward()
    grads = [p.grad for p in model.model.visual.parameters()]
    assert all(g is not None and torch.count_nonzero(g) == 0 for g in grads)


def test_qwen3_vl_zero_term_covers_the_deepstack_mergers(tmp_path_factory) -> None:
    """Qwen3-VL's tower also returns DeepStack features; every parameter (mergers included) gets a zero gradient."""
    from transformers import AutoModelForImageTextToText

    from evr1_train.losses import vision_zero_term
    from evr1_train.quickstart.model import TinyVLMSpec, save_tiny_vlm

    path = save_tiny_vlm(tmp_path_factory.mktemp("q3") / "tiny_qwen3_vl", TinyVLMSpec(arch="qwen3_vl"))
    q3 = AutoModelForImageTextToText.from_pretrained(path, torch_dtype=torch.float32).train()
    ids = torch.randint(10, 200, (1, 8))
    loss = q3(input_ids=ids, labels=ids).loss + vision_zero_term(q3)
    loss.backward()
    visual = q3.model.visual
    assert any("deepstack" in n for n, _ in visual.named_parameters())
    for name, p in visual.named_parameters():
        assert p.grad is not None, f"{name} did not take part"
        assert torch.count_nonzero(p.grad) == 0, name


def test_add_dummy_vision_leaves_pixel_batches_alone(model) -> None:
    from evr1_train.losses import add_dummy_vision

    e = torch.randn(1, 4, model.config.text_config.hidden_size)
    assert add_dummy_vision(e, model, pixel_values=torch.zeros(4, 4)) is e
    out = add_dummy_vision(e, model)
    assert torch.equal(out, e)
    assert out is not e
