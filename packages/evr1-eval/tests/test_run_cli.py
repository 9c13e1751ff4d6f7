"""`evr1-eval run` / `precompute` end to end with the fake backend: real benchmark module, real videos decoded by
evr1-cache (generated clips), cache hits, resume through the CLI, refused settings, error rows for missing videos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evr1_cache.testing import make_synthetic_video
from evr1_eval.cli import main

N = 6


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ds")
    media = root / "media"
    media.mkdir()
    for i in range(3):
        make_synthetic_video(media / f"clip{i}.mp4", n_frames=24 + 6 * i, fps=12.0, size=(96, 64))
    rows = [
        {
            "problem_id": f"p{i}",
            "problem": f"What is shown in clip {i}?",
            "options": ["A. a digit", "B. a cat", "C. a car", "D. nothing"],
            "solution": "<answer>A</answer>",
            "problem_type": "multiple choice",
            "path": f"clip{i % 3}.mp4" if i != N - 1 else "gone.mp4",
            "data_type": "video",
        }
        for i in range(N)
    ]
    ann = root / "ann"
    ann.mkdir()
    (ann / "mvbench.json").write_text(json.dumps(rows), encoding="utf-8")
    return root


def _run(dataset: Path, out: Path, *extra: str, response: str = "(A) a digit") -> int:
    return main(
        [
            "run",
            "--model",
            "fake-model",
            "--backend",
            "fake",
            "--engine-kwargs",
            json.dumps({"response": response}),
            "--benchmarks",
            "mvbench",
            "--annotations-dir",
            str(dataset / "ann"),
            "--media-root",
            str(dataset / "media"),
            "--out",
            str(out),
            "--no-progress",
            "--sampling",
            "fps=4",
            "--sampling",
            "max_pixels=3136",
            "--sampling",
            "min_pixels=784",
            *extra,
        ]
    )


def _rows(out: Path) -> dict[str, dict]:
    lines = (out / "mvbench" / "results.jsonl").read_text().splitlines()
    return {json.loads(x)["id"]: json.loads(x) for x in lines}


def test_run_decodes_scores_and_summarizes(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(dataset, tmp_path, "--limit", "4") == 0
    rows = _rows(tmp_path)
    assert sorted(rows) == ["p0", "p1", "p2", "p3"]
    assert all(r["error"] is None and r["score"] == 1.0 for r in rows.values())
    settings = json.loads((tmp_path / "mvbench" / "run.json").read_text())["fingerprint"]
    assert settings["sampling"]["fps"] == 4
    assert settings["sampling"]["max_pixels"] == 3136
    assert settings["annotations"].startswith("sha256:")
    assert "mvbench: 4 selected" in capsys.readouterr().out
    # resume with the full set: the missing video becomes an error row, the run still finishes
    assert _run(dataset, tmp_path) == 0
    rows = _rows(tmp_path)
    assert len(rows) == N
    assert "gone.mp4" in rows[f"p{N - 1}"]["error"]
    assert rows[f"p{N - 1}"]["score"] == 0.0
    summary = json.loads((tmp_path / "mvbench" / "summary.json").read_text())
    assert summary["benchmark"] == "mvbench"
    # another frame setting is refused, nothing is mixed in
    assert _run(dataset, tmp_path, "--sampling", "max_frames=8") == 2
    assert "sampling" in capsys.readouterr().err
    assert len(_rows(tmp_path)) == N


def test_precompute_then_run_reads_the_cache(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    cache = tmp_path / "cache"
    args = ["precompute", "mvbench", "--annotations-dir", str(dataset / "ann"), "--media-root", str(dataset / "media")]
    args += ["--cache-dir", str(cache), "--no-progress", "--workers", "1", "--sampling", "fps=4"]
    args += ["--sampling", "max_pixels=3136", "--sampling", "min_pixels=784"]
    assert main(args) == 1  # gone.mp4 cannot be cached: reported, exit code says so
    out = capsys.readouterr()
    assert "3 built" in out.out
    assert "gone.mp4" in out.err
    import evr1_cache.decode

    def no_decoding(*a: object, **k: object) -> None:
        raise AssertionError("decoded although the cache holds the frames")

    monkeypatch.setattr(evr1_cache.decode, "decode_video", no_decoding)
    monkeypatch.setattr(evr1_cache, "decode_video", no_decoding, raising=False)
    assert _run(dataset, tmp_path / "run", "--cache-dir", str(cache), "--limit", "5") == 0
    rows = _rows(tmp_path / "run")
    assert len(rows) == 5
    assert all(r["error"] is None for r in rows.values())


def test_run_reports_unknown_benchmark_and_missing_annotations(dataset: Path, tmp_path: Path, capsys) -> None:
    def run_fake(bench: str, annotations: Path) -> int:
        args = ["--model", "m", "--backend", "fake", "--benchmarks", bench, "--annotations-dir", str(annotations)]
        return main(["run", *args, "--out", str(tmp_path)])

    assert run_fake("mvbenh", dataset) == 2
    assert "mvbench" in capsys.readouterr().err
    code = run_fake("videomme", dataset / "ann")
    err = capsys.readouterr().err
    assert code == 2
    assert "videomme.json" in err
    assert "mvbench.json" in err


def test_a_cache_dir_that_does_not_exist_is_a_usage_error(dataset: Path, tmp_path: Path, capsys) -> None:
    """The media loader would decode every video behind a mistyped --cache-dir: the run refuses it instead."""
    assert _run(dataset, tmp_path, "--cache-dir", str(tmp_path / "typo")) == 2
    assert f"--cache-dir {tmp_path / 'typo'}: no such folder" in capsys.readouterr().err
    assert not any(tmp_path.glob("**/results*.jsonl"))


def test_bad_sampling_override_names_the_valid_fields(dataset: Path, tmp_path: Path, capsys) -> None:
    assert _run(dataset, tmp_path, "--sampling", "frames_per_second=2") == 2
    assert "max_frames" in capsys.readouterr().err


def test_frame_settings_follow_the_model_and_nframes_switches_fps_off(tmp_path: Path) -> None:
    from evr1_cache.spec import SamplingSpec
    from evr1_eval.jobs import sampling_overrides

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    spec = SamplingSpec(fps=2.0)
    assert sampling_overrides(spec, {}, str(tmp_path)) == {"size_factor": 32}
    assert sampling_overrides(spec, {"size_factor": 28}, str(tmp_path)) == {"size_factor": 28}
    assert sampling_overrides(spec, {}, "Qwen/not-a-local-folder") == {}
    got = sampling_overrides(spec, {"nframes": 16}, None)
    assert got == {"nframes": 16, "fps": None}
    import dataclasses

    assert dataclasses.replace(spec, **got).nframes == 16


def test_annotation_files_are_found_by_name_or_alias(tmp_path: Path) -> None:
    from evr1_eval.jobs import find_annotations

    (tmp_path / "Video-MME.JSONL").write_text("")
    (tmp_path / "other.json").write_text("[]")
    assert find_annotations(tmp_path, ["videomme", "video-mme"]).name == "Video-MME.JSONL"
    with pytest.raises(FileNotFoundError, match=r"lvbench\.json\(l\).*other\.json"):
        find_annotations(tmp_path, ["lvbench"])


def test_run_writes_a_manifest_and_records_the_protocol(dataset: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "official"
    assert _run(dataset, out, "--limit", "2") == 0
    manifest = json.loads((out / "mvbench" / "manifest.json").read_text())
    assert manifest["protocol"] == {"protocol": "official", "prompt_variant": "official"}
    assert manifest["model"] == "fake-model"
    assert manifest["backend"]["backend"] == "fake"
    assert manifest["versions"]["evr1-eval"]
    assert manifest["versions"]["evr1-rewards"]
    assert manifest["annotations"]["digest"].startswith("sha256:")
    assert manifest["annotations"]["rows_loaded"] == N
    assert manifest["sampling"]["fps"] == 4
    assert manifest["generation"]["temperature"] == 0.0
    assert manifest["reference"].startswith("EvolvingLMMs-Lab/lmms-eval:lmms_eval/tasks/mvbench/utils.py@v0.7.3")
    assert manifest["preset"] is None
    # the evr1 protocol asks in the training format: another prompt, so the same folder refuses it
    assert _run(dataset, out, "--limit", "2", "--protocol", "evr1") == 2
    assert "protocol" in capsys.readouterr().err
    evr1 = tmp_path / "evr1"
    settings = tmp_path / "train.json"
    settings.write_text(json.dumps({"think": False, "stop": ["</answer>"], "source": "train:quickstart"}))
    rc = _run(dataset, evr1, "--limit", "2", "--protocol", "evr1", "--evr1-settings", str(settings),
              response="<answer>A</answer>")  # fmt: skip
    assert rc == 0
    manifest = json.loads((evr1 / "mvbench" / "manifest.json").read_text())
    assert manifest["protocol"]["protocol"] == "evr1"
    assert manifest["protocol"]["evr1"]["source"] == "train:quickstart"
    assert manifest["generation"]["stop"] == ["</answer>"]
    rows = _rows(evr1)
    assert all(r["evr1_score"] == 1.0 for r in rows.values())  # evr1-rewards reads the <answer> tag
    # the official rule reads the raw text too: mvbench's `mcq_acc` finds the "A" of <answer>A</answer>
    assert all(r["score"] == 1.0 for r in rows.values())
    capsys.readouterr()
    # `report` prints both protocols' numbers and both manifests, and warns that the settings differ
    assert main(["report", str(out), str(evr1), "--out", str(tmp_path / "rep"), "--chart", "none"]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "the compared runs used different settings" in text
    assert "mvbench: protocol differs" in text
    assert "protocol evr1 (prompt official), preset none, model fake-model" in text
    assert "| mvbench | task_mean |" not in text
    assert "| mvbench | accuracy | 100.0 · evr1 " in text


def test_preset_settings_apply_and_explicit_flags_win(dataset: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "preset"
    rc = _run(dataset, out, "--limit", "1", "--preset", "qwen3_vl_official", "--max-tokens", "64")
    assert rc == 0
    assert "not apply" not in capsys.readouterr().err  # every published setting is applied now
    manifest = json.loads((out / "mvbench" / "manifest.json").read_text())
    assert manifest["generation"]["presence_penalty"] == 1.5
    assert manifest["preset"]["name"] == "qwen3_vl_official"
    assert any("Qwen3-VL#1540" in s["where"] for s in manifest["preset"]["sources"])
    assert manifest["protocol"]["prompt_variant"] == "qwen3_vl"
    assert manifest["generation"]["max_tokens"] == 64  # the explicit flag
    assert manifest["generation"]["temperature"] == 0.7  # the preset
    assert manifest["generation"]["top_k"] == 20
    # frame settings: the preset's (2,048 frames, 224K video tokens, size factor 32), the command line's on top
    assert manifest["sampling"]["max_frames"] == 2048
    assert manifest["sampling"]["size_factor"] == 32
    assert manifest["sampling"]["fps"] == 4  # --sampling fps=4 (from _run) wins over the preset's 2
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--preset" in capsys.readouterr().out


def test_rows_that_fail_to_load_make_the_exit_status_say_so(dataset: Path, tmp_path: Path, capsys) -> None:
    ann = tmp_path / "ann"
    ann.mkdir()
    rows = json.loads((dataset / "ann" / "mvbench.json").read_text())[:2]
    # a crafted row: options nested 100,000 levels deep (json.loads alone would raise RecursionError)
    text = json.dumps(rows)[:-1] + ', {"problem": "q", "options": ' + "[" * 100_000 + '"x"' + "]" * 100_000 + "}]"
    (ann / "mvbench.json").write_text(text, encoding="utf-8")
    args = ["run", "--model", "m", "--backend", "fake", "--benchmarks", "mvbench", "--annotations-dir", str(ann),
            "--media-root", str(dataset / "media"), "--out", str(tmp_path / "o"), "--no-progress"]  # fmt: skip
    assert main(args) == 1  # two rows ran, one could not be loaded: not a success
    err = capsys.readouterr().err
    assert "1 annotation row(s) could not be loaded (2 loaded)" in err
    assert "nested more than 32 levels deep" in err
    assert (tmp_path / "o" / "mvbench" / "results.jsonl").exists()
    (ann / "mvbench.json").write_text(json.dumps([{"problem": "no truth"}, {"bad": 1}]), encoding="utf-8")
    assert main([*args[:-3], "--out", str(tmp_path / "o2"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "no row of mvbench could be loaded" in err
    assert "first reasons" in err
    assert not (tmp_path / "o2").exists()  # nothing was run, no folder pretends otherwise


def test_run_answer_tags_official_by_default_and_read_on_request(dataset: Path, tmp_path: Path, capsys) -> None:
    """`run` scores the official protocol with the benchmark's own reading of the raw response (mvbench's `mcq_acc`
    finds the "a" of "so A is wrong": right, the truth is A) unless `--answer-tags read` hands it the final tag (B:
    wrong). The choice is part of the run settings: a resume with the other choice is refused (exit 2)."""
    tagged = "Let me think... <answer>B</answer> so A is wrong"
    official, read = tmp_path / "official", tmp_path / "read"
    assert _run(dataset, official, "--limit", "2", response=tagged) == 0
    assert {(r["extracted"], r["score"]) for r in _rows(official).values()} == {("A", 1.0)}
    assert _run(dataset, read, "--limit", "2", "--answer-tags", "read", response=tagged) == 0
    rows = _rows(read)
    assert {(r["extracted"], r["score"], r["details"]["answer_tag_read"]) for r in rows.values()} == {("B", 0.0, True)}
    printed = capsys.readouterr().out
    assert "verified 2/2" in printed
    assert "(official scores read <answer> tags: --answer-tags read)" in printed
    fingerprint = json.loads((read / "mvbench" / "run.json").read_text())["fingerprint"]
    assert fingerprint["answer_tags"] == "read"
    assert "answer_tags" not in json.loads((official / "mvbench" / "run.json").read_text())["fingerprint"]
    summary = json.loads((read / "mvbench" / "summary.json").read_text())
    assert summary["counts"]["answer_tag_read"] == 2
    assert any(n.startswith("answer tags read") for n in summary["notes"])
    assert _run(dataset, read, "--limit", "4", response=tagged) == 2  # resumed without the option: refused
    assert "answer_tags" in capsys.readouterr().err
    assert len(_rows(read)) == 2  # nothing mixed in


def test_run_reasoning_tags_official_by_default_keep_on_request(dataset: Path, tmp_path: Path, capsys) -> None:
    """MVBench's official pipeline strips reasoning blocks (lmms-eval), so the answer after them counts (A: right);
    `--reasoning-tags keep` hands `mcq_acc` the raw response, whose first standalone letter is the reasoning's B
    (wrong). The choice is part of the run settings: a resume read the other way is refused (exit 2)."""
    thought = "<think>Option B looks plausible.</think>A"
    official, keep = tmp_path / "official", tmp_path / "keep"
    assert _run(dataset, official, "--limit", "2", response=thought) == 0
    assert {(r["extracted"], r["score"]) for r in _rows(official).values()} == {("A", 1.0)}
    assert "reasoning_tags" not in json.loads((official / "mvbench" / "run.json").read_text())["fingerprint"]
    assert json.loads((official / "mvbench" / "manifest.json").read_text())["reasoning_tags"] == "official"
    capsys.readouterr()
    assert _run(dataset, keep, "--limit", "2", "--reasoning-tags", "keep", response=thought) == 0
    rows = _rows(keep)
    assert {(r["extracted"], r["score"], r["details"]["reasoning_tags"]["differs"]) for r in rows.values()} == {
        ("B", 0.0, True)}  # fmt: skip
    printed = capsys.readouterr().out
    assert "verified 2/2" in printed
    assert "(reasoning tags: --reasoning-tags keep)" in printed
    assert json.loads((keep / "mvbench" / "run.json").read_text())["fingerprint"]["reasoning_tags"] == "keep"
    assert json.loads((keep / "mvbench" / "manifest.json").read_text())["reasoning_tags"] == "keep"
    summary = json.loads((keep / "mvbench" / "summary.json").read_text())
    assert summary["counts"]["reasoning_tags_differ"] == 2
    assert any(n.startswith("reasoning tags kept") for n in summary["notes"])
    assert _run(dataset, keep, "--limit", "4", response=thought) == 2  # resumed without the option: refused
    assert "reasoning_tags" in capsys.readouterr().err
    assert _run(dataset, official, "--limit", "4", "--reasoning-tags", "strip", response=thought) == 2  # and back
    assert "reasoning_tags" in capsys.readouterr().err
    assert len(_rows(keep)) == len(_rows(official)) == 2  # nothing mixed in
