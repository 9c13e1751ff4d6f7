"""The local engine's agent trainer on the agent quickstart's flash clips (tiny random Qwen2.5-VL, CPU): stored expert
episodes replayed through the real tools, the tools' tokens out of the loss, a full RL step with tool-use metrics, the
tool-less control (one turn, the answer alone), and the protocol record an evaluator replays the tools from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

SMALL = ("engine.quickstart.data.n_train=16", "engine.quickstart.data.n_heldout=8", "trainer.total_training_steps=2")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def agent_cfg(tmp_path_factory: pytest.TempPathFactory, quickstart_compose: Any) -> Any:
    """`agent_cfg(out, *overrides)`: the shortened agent quickstart on inputs built once."""
    from omegaconf import OmegaConf

    from evr1_train.engine.local import prepare_inputs

    compose_quickstart = quickstart_compose
    root = tmp_path_factory.mktemp("agent_quickstart")
    prepare_inputs(compose_quickstart(root, *SMALL, experiment="quickstart_agent"))

    def make(out: Path, *overrides: str) -> Any:
        cfg = compose_quickstart(root, *SMALL, *overrides, experiment="quickstart_agent")
        OmegaConf.resolve(cfg)
        cfg.engine.output_dir = str(out)
        cfg.engine.quickstart.enable = False
        return cfg

    return make


def _trainer(cfg: Any) -> Any:
    from evr1_train.engine.agent_trainer import AgentTrainer
    from evr1_train.engine.config import LocalConfig

    return AgentTrainer(LocalConfig.from_cfg(cfg))


def _batch(trainer: Any) -> list[Any]:
    from evr1_train.engine.base import StepTimer

    return trainer._prepare_batch(1, StepTimer())


def test_flash_is_invisible_in_the_overview_and_visible_in_the_tools_window() -> None:
    import random

    from evr1_train.quickstart.shapes import FLASH_WINDOW, make_scene

    rng = random.Random(0)
    for _ in range(20):
        scene = make_scene("flash", rng)
        assert (scene.frame(0.0) == 16).all()
        assert (scene.frame(3.875) == 16).all()
        window = [FLASH_WINDOW[0] + i / 4 for i in range(9)]  # get_frames over the window at 4 fps
        assert sum(bool((scene.frame(t) != 16).any()) for t in window) >= 2


def test_the_expert_episode_calls_the_tool_gets_frames_and_answers(agent_cfg: Any, tmp_path: Path) -> None:
    trainer = _trainer(agent_cfg(tmp_path / "run"))
    prompts = _batch(trainer)
    prompt = prompts[0]
    text = trainer.tokenizer.decode(prompt.encoded.input_ids)
    assert "get_frames" in text
    assert "<tool_call>" in text
    seq = trainer._offline_rollout(0, prompt)
    trainer._score(prompt, seq)
    ep = seq.episode
    assert [s.trained for s in ep.segments] == [True, False, True]  # call, the tools' answer, the answer
    assert ep.served == 1
    assert ep.finished
    assert seq.accuracy == 1.0
    call = ep.record()["turns"][0]["calls"][0]
    assert call["name"] == "get_frames"
    assert all(1.0 <= t <= 3.0 for t in call["media"][0]["timestamps"])
    width = len(seq.response)
    mask = trainer._response_mask([seq], width)[0]
    tool = ep.segments[1]
    start = int(ep.segments[0].ids.shape[0])
    assert mask[:start].eq(1).all()
    assert mask[start : start + int(tool.ids.shape[0])].eq(0).all()
    assert mask[start + int(tool.ids.shape[0]) :].eq(1).all()
    video_pad = trainer.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    assert video_pad in tool.ids.tolist()
    assert "pixel_values_videos" in tool.vision
    inputs = trainer._forward_inputs(prompts, [seq], [0])
    grids = inputs["prompts"][0].vision["video_grid_thw"]
    assert grids.shape[0] == 2  # the overview's grid, then the tool's clip


def test_the_reward_lands_on_the_last_trained_token_of_an_episode() -> None:
    """The tools' tokens are holes in the mask: the score goes on the last 1, so it survives the mask."""
    from evr1_train.engine.algorithms import outcome_rewards

    mask = torch.tensor([[1, 1, 0, 0, 0, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0, 0], [0] * 8], dtype=torch.float32)
    rewards = outcome_rewards([1.0, 0.5, 0.25], mask)
    assert rewards[0].tolist() == [0, 0, 0, 0, 0, 0, 1.0, 0]
    assert rewards[1, 2] == 0.5
    assert rewards[2].sum() == 0


def test_a_step_trains_on_episodes_and_reports_tool_use(agent_cfg: Any, tmp_path: Path) -> None:
    trainer = _trainer(agent_cfg(tmp_path / "run"))
    seen: dict[str, Any] = {}
    trainer.on_rollout = lambda step, prompts, seqs, adv, mask: seen.update(seqs=seqs, adv=adv, mask=mask)
    metrics = trainer.step()
    expert = [i for i, s in enumerate(seen["seqs"]) if s.offline and s.accuracy == 1.0]
    assert expert
    assert all(float(seen["adv"][i][0]) > 0 for i in expert)
    assert (seen["adv"] * (1 - seen["mask"])).abs().sum() == 0  # nothing on the tools' tokens
    for key in ("rollout/agent/tool_use_rate", "rollout/agent/turns", "reward/agent/answer", "actor/pg_loss"):
        assert key in metrics, key
    assert 0.0 <= metrics["rollout/agent/tool_use_rate"] <= 1.0
    val = trainer.validate(limit=4)
    assert "val/agent/tool_use_rate" in val
    assert 0.0 <= val["val/accuracy"] <= 1.0
    record = next(iter(trainer.checkpoint_files().values()))
    assert record["agent"]["tools"] == ["get_frames"]
    assert record["agent"]["max_turns"] == 2
    assert record["agent"]["tool_config"]["fps"] == 4.0


def test_without_tools_the_episode_is_one_turn_and_the_expert_keeps_its_answer(agent_cfg: Any, tmp_path: Path) -> None:
    trainer = _trainer(agent_cfg(tmp_path / "run", "evr1.agent.tools=[]"))
    prompt = _batch(trainer)[0]
    assert "<tool_call>" not in trainer.tokenizer.decode(prompt.encoded.input_ids)
    seq = trainer._offline_rollout(0, prompt)
    trainer._score(prompt, seq)
    assert [s.trained for s in seq.episode.segments] == [True]
    assert seq.episode.final_text.startswith("<answer>")
    assert seq.accuracy == 1.0
    assert trainer._agent_record()["tools"] == []


def test_the_control_run_reuses_the_inputs_without_tools(agent_cfg: Any, tmp_path: Path) -> None:
    from evr1_train.engine.compare import AgentComparison, control_config

    cfg = agent_cfg(tmp_path / "run")
    control = control_config(cfg, tmp_path / "run")
    assert list(control.evr1.agent.tools) == []
    assert control.engine.output_dir == f"{tmp_path / 'run'}-no-tools"
    assert control.actor_rollout_ref.model.path == cfg.actor_rollout_ref.model.path  # the same initial model
    assert control.data.train_files == cfg.data.train_files
    assert not control.engine.quickstart.enable
    table = AgentComparison(10, 0.75, 0.25, 1.0, 60.0, 30.0, "a", "b").table()
    assert "+0.500" in table
    assert "0.750" in table


def test_remax_is_refused(agent_cfg: Any, tmp_path: Path) -> None:
    from evr1_train.engine.config import ConfigError

    with pytest.raises(ConfigError, match="remax"):
        _trainer(agent_cfg(tmp_path / "run", "algorithm.adv_estimator=remax"))


def test_the_training_viewer_shows_each_turn_and_the_frames_the_tools_returned(agent_cfg: Any, tmp_path: Path) -> None:
    import re

    from evr1_train.rollouts.engines import attach_local, finish_local

    out = tmp_path / "run"
    cfg = agent_cfg(out, "evr1.rollout_dump.every_n_steps=1", "evr1.rollout_dump.write_viewer=true")
    trainer = _trainer(cfg)
    writer = attach_local(trainer, cfg, out)
    trainer.step()
    index = finish_local(writer, out)
    assert index is not None
    cards = "".join(p.read_text() for p in sorted((out / "viewer").glob("data/*/chunk-*.js")))
    assert "[turn 1] &lt;tool_call&gt;" in cards or "[turn 1] <tool_call>" in cards  # the expert's call, as written
    assert "-&gt; get_frames(start=1, end=3): video at" in cards or "-> get_frames(start=1, end=3): video at" in cards
    note = re.search(r"response \d, turn 1: get_frames\(start=1, end=3\) returned these frames", cards)
    assert note is not None  # the strip of the frames the call returned, labelled with the response and turn
    strip = cards[: note.start()]
    strip = strip[strip.rindex('<figure class=\\"strip\\"') :]
    assert len(re.findall(r"thumbs/[0-9a-f]+/\d{5}\.jpg", strip)) == 8  # the call's 8 frames, thumbnails of the cache
