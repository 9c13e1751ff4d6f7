"""The one model-path checker of training and evaluation: one line naming the setting, the path and the fix."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evr1_cache import ModelPathError, check_model_path, explain_load_error, resolve_model_path


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


def test_local_paths_that_are_no_model_are_named(tmp_path: Path, online: None) -> None:
    with pytest.raises(ModelPathError, match=r"--model='\./missing/model': no such model folder"):
        check_model_path("./missing/model", "--model")
    with pytest.raises(FileNotFoundError, match="no such model folder"):  # also a FileNotFoundError, a ValueError
        check_model_path(str(tmp_path / "nope"), "actor_rollout_ref.model.path")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"is a folder without a config\.json"):
        check_model_path(str(tmp_path / "empty"), "k")
    (tmp_path / "weights.bin").write_text("")
    with pytest.raises(ModelPathError, match="is a file"):
        check_model_path(str(tmp_path / "weights.bin"), "k")
    with pytest.raises(ModelPathError, match=r"model\.path is empty"):
        check_model_path("", "model.path")


def test_model_and_adapter_folders_pass_and_hub_ids_are_left_to_the_hub(tmp_path: Path, online: None) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert check_model_path(str(tmp_path / "m"), "k") == str(tmp_path / "m")
    (tmp_path / "lora").mkdir()
    (tmp_path / "lora" / "adapter_config.json").write_text("{}")
    assert check_model_path(str(tmp_path / "lora"), "k", adapter_ok=True) == str(tmp_path / "lora")
    with pytest.raises(ModelPathError, match=r"without a config\.json"):
        check_model_path(str(tmp_path / "lora"), "k")
    assert check_model_path("Qwen/Qwen3-VL-8B-Instruct", "k") == "Qwen/Qwen3-VL-8B-Instruct"
    assert check_model_path("gpt2", "k") == "gpt2"  # a legacy id without an organisation


def test_offline_a_hub_id_must_be_in_the_local_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if importlib.util.find_spec("huggingface_hub") is None:
        pytest.skip("huggingface_hub is not installed: the local Hub cache cannot be asked")
    with pytest.raises(ModelPathError, match="HF_HUB_OFFLINE set, not a Hugging Face Hub id in the local cache"):
        check_model_path("nobody/not-cached-here", "actor_rollout_ref.model.path")


def test_evr1_train_checkpoints_and_runs_are_recognised(tmp_path: Path) -> None:
    step = tmp_path / "run" / "checkpoints" / "step_000040"
    (step / "actor").mkdir(parents=True)
    (step / "actor" / "config.json").write_text("{}")
    with pytest.raises(ModelPathError, match=r"evr1-train checkpoint: pass --model=.*actor, or .*--from-train"):
        check_model_path(str(step), "--model")
    assert check_model_path(str(step / "actor"), "--model") == str(step / "actor")
    with pytest.raises(ModelPathError, match="evr1-train run folder"):
        check_model_path(str(tmp_path / "run"), "--model")
    (step.parent / "latest.json").write_text(json.dumps({"path": step.name}))
    assert resolve_model_path(str(tmp_path / "run")) == str(step / "actor")


def test_a_verl_checkpoint_folder_names_its_newest_hf_model(tmp_path: Path) -> None:
    """RL from `evr1-train sft`: the SFT run's checkpoint folder resolves to global_step_N/huggingface."""
    for step in (50, 100):
        (tmp_path / f"global_step_{step}" / "huggingface").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("100\n")
    assert resolve_model_path(str(tmp_path)) == str(tmp_path / "global_step_100" / "huggingface")
    assert resolve_model_path("Qwen/Qwen2.5-VL-7B-Instruct") == "Qwen/Qwen2.5-VL-7B-Instruct"


def test_a_failed_load_is_one_line(tmp_path: Path, online: None) -> None:
    exc = OSError("\n  first line of the library\nsecond line")
    folder = explain_load_error(str(tmp_path), "--model", exc)
    assert (
        str(folder)
        == f"--model={str(tmp_path)!r}: the folder could not be loaded as a model: first line of the library"
    )
    hub = explain_load_error("org/name", "k", exc)
    assert "loading it as a Hugging Face Hub model id failed: first line of the library" in str(hub)
