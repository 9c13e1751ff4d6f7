"""Run folders and the first hour: a variant never reuses another run's folder, `--help` is short and light, verl's
start-up noise is filtered, a missing model path is named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evr1_train.runs import RunSettingsError, check_resume, settings_diff, variant_name, write_settings

CONF = Path(__file__).parent / "conf"


def test_variant_name_names_the_run_changing_overrides() -> None:
    readme = ["trainer.total_training_steps=100", "algorithm.adv_estimator=rloo", "evr1.hybrid.enable=false"]
    assert variant_name(readme) == "adv_estimator=rloo,hybrid.enable=false,total_training_steps=100"
    assert variant_name(list(reversed(readme))) == variant_name(readme)  # order does not matter
    # logging, evaluation cadence, threads, the preset itself and the folder are not part of a run's identity
    assert variant_name(["+experiment=quickstart", "trainer.test_freq=5", "engine.num_threads=2"]) == ""
    assert variant_name(["+evr1_algo=dapo", "data.evr1.video.fps=1.0"]) == "evr1_algo=dapo,fps=1.0"
    assert variant_name(["engine.quickstart.data.n_train=8", "evr1.hybrid.k=2"]) == "hybrid.k=2,n_train=8"
    assert variant_name(["x.a.enable=true", "y.b.enable=false"]) == "a.enable=true,b.enable=false"
    assert variant_name(["evr1.frozen_modules=[vision_tower,merger]"]) == "frozen_modules=vision_tower_merger"
    long = variant_name([f"a.key_{i}=value_{i}" for i in range(12)])
    assert len(long) <= 80
    assert long != variant_name([f"a.key_{i}=value_{i}" for i in range(11)])


def test_a_folder_made_with_other_settings_is_not_resumed(tmp_path: Path) -> None:
    old = {"algorithm.adv_estimator": "grpo", "trainer.total_training_steps": 300, "data.seed": 1}
    new = {**old, "algorithm.adv_estimator": "rloo", "trainer.total_training_steps": 100, "added.by_new_verl": 1}
    assert settings_diff(old, new) == [
        "algorithm.adv_estimator: 'grpo' -> 'rloo'",
        "trainer.total_training_steps: 300 -> 100",
    ]
    write_settings(tmp_path, old)
    with pytest.raises(RunSettingsError, match=r"(?s)adv_estimator: 'grpo' -> 'rloo'.*engine\.resume=true"):
        check_resume(tmp_path, new, "auto", has_checkpoint=True)
    assert check_resume(tmp_path, new, "true", has_checkpoint=True) == settings_diff(old, new)
    assert check_resume(tmp_path, new, "disable", has_checkpoint=True) == []
    assert check_resume(tmp_path, new, "auto", has_checkpoint=False) == []  # nothing to resume
    assert check_resume(tmp_path, old, "auto", has_checkpoint=True) == []  # same settings: resume


def _cli(args: list[str]) -> int:
    from evr1_train.cli import main

    return main(["--config-dir", str(CONF), *args])


def _table_start(out: str) -> float:
    line = next(x for x in out.splitlines() if x.startswith("val/accuracy "))
    return float(line.split()[1])


@pytest.mark.verl
def test_the_readme_variation_after_the_main_job_is_its_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's variation command after the main job: a new folder, its own steps, table and plot; the main
    run's files are untouched. Through the real `evr1-train` entry point (Hydra and all), twice in one process."""
    monkeypatch.chdir(tmp_path)
    assert _cli(["+experiment=quickstart_tiny"]) == 0
    main_out = capsys.readouterr().out
    main = tmp_path / "runs" / "quickstart_tiny"
    assert "steps 2 " in main_out
    png = (main / "learning_curve.png").read_bytes()
    log = (main / "metrics.jsonl").read_text()
    variation = ["trainer.total_training_steps=3", "algorithm.adv_estimator=rloo", "evr1.hybrid.enable=false"]
    assert _cli(["+experiment=quickstart_tiny", *variation]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "runs" / "quickstart_tiny-adv_estimator=rloo,hybrid.enable=false,total_training_steps=3"
    assert f"run folder: {Path('runs') / run.name}" in out
    assert "grpo" not in out.split("held-out rows,")[1].split("\n")[0]
    assert "rloo + vanilla, n=4, hybrid=off" in out
    assert "resumed" not in out
    assert "steps 3 " in out  # trained its own 3 steps from step 0, not 0 steps from the main run's last checkpoint
    assert _table_start(out) == _table_start(main_out)  # both tables start at the same untrained model
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [int(r["step"]) for r in rows if "critic/score/mean" in r] == [1, 2, 3]
    assert all(r.get("hybrid/offline_samples", 0) == 0 for r in rows if "critic/score/mean" in r)
    assert (run / "learning_curve.png").stat().st_size > 1000
    assert (main / "learning_curve.png").read_bytes() == png  # the main run's plot and log are untouched
    assert (main / "metrics.jsonl").read_text() == log
    settings = json.loads((run / "run_settings.json").read_text())["settings"]
    assert settings["algorithm.adv_estimator"] == "rloo"
    protocol = json.loads((run / "checkpoints" / "step_000003" / "evr1_train_protocol.json").read_text())
    assert protocol["generation"]["eos_tokens"] == ["<|im_end|>"]
    assert protocol["sampling"]["video"]["key"]
    assert "<|im_start|>" in protocol["chat_template"]

    # the same variation pointed at the main run's folder is refused, naming what differs ...
    with pytest.raises(SystemExit) as refused:
        _cli(["+experiment=quickstart_tiny", *variation, "engine.output_dir=runs/quickstart_tiny"])
    assert refused.value.code == 2
    message = capsys.readouterr().err
    assert "algorithm.adv_estimator: 'grpo' -> 'rloo'" in message
    assert "Traceback" not in message
    # ... unless forced: then it resumes the main run's step 2 and trains one more step under the new settings
    assert _cli(["+experiment=quickstart_tiny", *variation, "engine.output_dir=runs/quickstart_tiny",
                 "engine.resume=true"]) == 0  # fmt: skip
    forced = capsys.readouterr().out
    assert "resumed from" in forced
    assert "steps 3 " in forced


def test_help_is_short_and_imports_neither_hydra_nor_verl() -> None:
    code = (
        "import sys; from evr1_train.cli import main; rc = main(['--help']); "
        "heavy = sorted({'verl', 'hydra', 'torch', 'transformers'} & {m.split('.')[0] for m in sys.modules}); "
        "print('HEAVY', heavy); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = done.stdout
    assert "HEAVY []" in out
    assert len(out.splitlines()) < 60
    for needle in ("+experiment", "quickstart", "qwen2_5_vl_7b_{", "engine", "--cfg job", "Examples:", "Commands:"):
        assert needle in out, needle


def test_sft_command_prints_its_usage_without_starting_torchrun(capsys: pytest.CaptureFixture[str]) -> None:
    from evr1_train.cli import main

    assert main(["sft", "--help"]) == 0
    out = capsys.readouterr().out
    assert "torchrun" in out
    assert "+sft_experiment=" in out


def test_unknown_command_is_refused_with_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    from evr1_train.cli import COMMANDS, main, register_command

    assert main(["trian"]) == 2
    assert "neither a command nor a KEY=VALUE override" in capsys.readouterr().err
    name = next(iter(COMMANDS), None)
    if name:
        with pytest.raises(ValueError, match="already registered"):
            register_command(name, "x:y", "dup")
    with pytest.raises(ValueError, match="cannot be a command name"):
        register_command("a=b", "x:y", "bad")


@pytest.mark.verl
def test_verls_start_up_noise_is_filtered_and_only_that(caplog: pytest.LogCaptureFixture) -> None:
    """Re-run verl's own code that prints the 7 start-up notes: without the filters they appear, with them they do not,
    and an unrelated warning from the same logger still shows."""
    import importlib
    import logging
    import warnings

    import torch
    import verl.workers.engine as engines
    from verl.plugin.platform import platform_manager

    from evr1_train import quiet

    if torch.cuda.is_available():
        pytest.skip("the platform notes only appear without a GPU")
    logger = logging.getLogger(platform_manager.__name__)
    installed = [f for f in logger.filters if isinstance(f, quiet.NoAcceleratorNotes)]  # by an earlier run()

    def noise(filtered: bool) -> tuple[list[str], list[str]]:
        caplog.clear()
        note_filter = quiet.NoAcceleratorNotes()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if filtered:
                quiet.filter_engine_warnings()
                logger.addFilter(note_filter)
            try:
                importlib.reload(engines)
                with caplog.at_level(logging.WARNING, logger=platform_manager.__name__):
                    platform_manager._detect_platform_name()
                    platform_manager._create_platform("nvidia")
                    platform_manager.logger.warning("an unrelated verl warning")
            finally:
                logger.removeFilter(note_filter)
        engine_notes = [str(w.message) for w in caught if "engine is not available" in str(w.message)]
        return engine_notes, [r.getMessage() for r in caplog.records]

    for f in installed:
        logger.removeFilter(f)
    try:
        shown, logged = noise(filtered=False)
        assert len(shown) == 5, shown  # torchtitan, veomni, automodel, mindspeed, megatron
        assert len(logged) == 3, logged
        assert logged[-1] == "an unrelated verl warning"
        shown, logged = noise(filtered=True)
        assert shown == []
        assert logged == ["an unrelated verl warning"]
    finally:
        for f in installed:
            logger.addFilter(f)
