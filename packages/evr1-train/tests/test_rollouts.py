"""Rollout dumps (evr1_train.rollouts): config, append-only + resumable step files, the size cap, media references
read from the real frame cache, the verl field conversion, and `evr1-train view` building the viewer from them.

The local engine writing dumps during a real run (and resuming) is in test_engine_local.py; verl's V1 trainer
writing them is checked by the `train_e2e` smoke run (testenv/verl_cpu/run_smoke.py, check_evr1_dumps).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evr1_train.rollouts.view import find_rollouts, main, read_dump, train_run_record
from evr1_train.rollouts.writer import DumpConfig, RolloutDumpWriter, cut, dumped_steps, group_record, media_records


def _group(i: int, text: str = "<answer>B</answer>", media: list[dict] | None = None) -> dict[str, Any]:
    return group_record(
        engine="local",
        uid=f"u{i}",
        row_id=f"r{i}",
        task="color",
        data_source="toy",
        problem_type="multiple choice",
        messages=[{"role": "user", "content": [{"type": "video", "video": "x.mp4"}, {"type": "text", "text": "Q?"}]}],
        ground_truth="B",
        media=media or [],
        responses=[
            {
                "text": text,
                "offline": False,
                "reward": {"overall": 1.0, "accuracy": 1.0, "format": 1.0},
                "advantage": 0.5,
                "tokens": 4,
            },
            {
                "text": "<answer>C</answer>",
                "offline": True,
                "reward": {"overall": 0.1, "accuracy": 0.0, "format": float("nan")},
                "advantage": -0.5,
                "tokens": 4,
            },
        ],
        max_chars=200,
        extras={"options": ["A. red", "B. green", "C. blue"]},
    )


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"every_n_steps": 0}, "every_n_steps must be >= 1"),
        ({"on_cap": "drop"}, "on_cap must be one of"),
        ({"max_bytes": 0}, "max_bytes must be >= 1"),
        ({"evry_n_steps": 5}, "unknown evr1.rollout_dump keys"),  # a typo is an error, not a silent default
    ],
)
def test_config_errors_name_the_key(node: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DumpConfig.from_mapping(node)


def test_due_steps() -> None:
    cfg = DumpConfig.from_mapping({"enable": True, "every_n_steps": 5})
    assert [s for s in range(1, 16) if cfg.due(s)] == [1, 5, 10, 15]
    assert not DumpConfig(enable=False).due(10)
    assert [s for s in range(1, 11) if DumpConfig(enable=True, every_n_steps=5, include_first=False).due(s)] == [5, 10]


def test_group_record_schema() -> None:
    rec = _group(0, text="x" * 500)
    assert rec["prompt"] == "<video>Q?"
    assert rec["ground_truth"] == "B"
    first, second = rec["responses"]
    assert first["text"].startswith("x" * 200)
    assert first["cut_chars"] == 300
    assert first["extracted"] is None
    assert second["extracted"] == "C"
    assert second["reward"]["format"] is None  # NaN is not JSON
    assert second["offline"] is True
    assert first["advantage"] == 0.5
    assert cut("short", 100) == ("short", 0)
    assert rec["prompt_record"]["parts"] == [["video", "x.mp4"], ["text", "Q?"]]


def test_the_viewer_reads_the_recorded_prompt_and_checks_its_hash(tmp_path: Path) -> None:
    w = RolloutDumpWriter(tmp_path, DumpConfig(enable=True, every_n_steps=1), engine="local")
    w.start(1)
    good, edited, old = _group(1), _group(2), _group(3)
    edited["prompt_record"]["parts"][1][1] = "Another question?"
    del old["prompt_record"]
    w.write_step(1, [good, edited, old])
    run = train_run_record(tmp_path, rollouts=tmp_path)
    cards = {s.label: s for s in run.samples}
    assert (
        run.summary["online correct verdicts @ step 1 (share with accuracy reward >= 0.5)"] == 1.0
    )  # says what it counts
    assert cards["r1"].prompt_hash == good["prompt_record"]["hash"]
    assert cards["r1"].prompt == "<video>Q?"
    assert cards["r2"].prompt_hash is None
    assert "does not hash to what the model was sent" in cards["r2"].notes[0]
    assert cards["r3"].prompt_hash is None
    assert "no prompt was recorded" in cards["r3"].notes[0]


def test_steps_are_atomic_and_a_resume_neither_duplicates_nor_loses(tmp_path: Path) -> None:
    cfg = DumpConfig(enable=True, every_n_steps=1)
    w = RolloutDumpWriter(tmp_path, cfg, engine="local")
    w.start(1)
    for step in (1, 2, 3, 4):
        w.write_step(step, [_group(step), _group(step + 100)])
    assert list(dumped_steps(tmp_path)) == [1, 2, 3, 4]
    assert not list(tmp_path.glob(".*tmp"))
    before = {s: p.read_bytes() for s, p in dumped_steps(tmp_path).items()}
    # the run died after step 4 but its last checkpoint was step 2: the resumed process starts at step 3
    w2 = RolloutDumpWriter(tmp_path, cfg, engine="local")
    assert w2.start(3) == [3, 4]
    assert list(dumped_steps(tmp_path)) == [1, 2]
    assert {s: dumped_steps(tmp_path)[s].read_bytes() for s in (1, 2)} == {1: before[1], 2: before[2]}
    w2.write_step(3, [_group(3)])
    w2.write_step(4, [_group(4)])
    _, records, problems = read_dump(tmp_path)
    assert not problems
    assert [r["step"] for r in records] == [1, 1, 2, 2, 3, 4]  # each step once
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["dropped_on_resume"] == [3, 4]
    assert sorted(manifest["steps"], key=int) == ["1", "2", "3", "4"]


def test_cap_stop_keeps_the_earliest_steps(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    size = len(json.dumps({"schema": "evr1.rollouts/1", "step": 1, **_group(1)}, ensure_ascii=False)) + 1
    w = RolloutDumpWriter(tmp_path, DumpConfig(enable=True, every_n_steps=1, max_bytes=int(size * 2.5)), engine="local")
    w.start(1)
    written = [w.write_step(s, [_group(s)]) is not None for s in range(1, 6)]
    assert written == [True, True, False, False, False]
    assert list(dumped_steps(tmp_path)) == [1, 2]
    assert json.loads((tmp_path / "manifest.json").read_text())["capped_at_step"] == 3
    assert sum("max_bytes" in r.message for r in caplog.records) == 1  # warned once
    _, _, problems = read_dump(tmp_path)
    assert any("max_bytes at step 3" in p for p in problems)


def test_cap_rotate_keeps_the_newest_steps(tmp_path: Path) -> None:
    size = len(json.dumps({"schema": "evr1.rollouts/1", "step": 1, **_group(1)}, ensure_ascii=False)) + 1
    cfg = DumpConfig(enable=True, every_n_steps=1, max_bytes=int(size * 2.5), on_cap="rotate")
    w = RolloutDumpWriter(tmp_path, cfg, engine="local")
    w.start(1)
    for s in range(1, 6):
        w.write_step(s, [_group(s)])
    assert list(dumped_steps(tmp_path)) == [4, 5]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["rotated_out"] == [1, 2, 3]
    assert sum(v["bytes"] for v in manifest["steps"].values()) <= cfg.max_bytes


def test_media_records_point_at_the_cache_entries(video_data: dict[str, Path], make_opts: Any) -> None:
    from evr1_cache import CacheReader, read_rows
    from evr1_train.data import row_messages

    opts = make_opts()
    reader = CacheReader(opts.cache_dir)
    for source in ("built", "raw"):  # with the build's `video_cache` refs, and looked up by content + spec
        opts = make_opts(media_root=str(video_data["built"].parent)) if source == "built" else make_opts()
        row = next(r for r in read_rows(video_data[source]) if r.get("videos"))
        messages = row_messages(row, opts)
        media = media_records(messages, opts.cache_dir, opts.video_spec(), opts.image_spec())
        video = next(m for m in media if m["kind"] == "video")
        _, meta = reader.load(video["path"], opts.video_spec())
        assert video["frames_from"] == "cache", (source, video)
        assert (Path(opts.cache_dir) / video["cache_file"]).is_file()
        assert video["frame_indices"] == list(meta.frames_indices)
        assert video["timestamps"] == [round(t, 4) for t in meta.timestamps]
    decoded = media_records(messages, None, opts.video_spec(), opts.image_spec())
    assert decoded[0]["frames_from"] == "decoded"
    assert decoded[0]["cache_file"] is None


def test_view_builds_the_site_from_dumps(video_data: dict[str, Path], make_opts: Any, tmp_path: Path, capsys) -> None:
    from evr1_cache import read_rows
    from evr1_train.data import row_messages

    opts = make_opts(media_root=str(video_data["built"].parent))
    row = next(r for r in read_rows(video_data["built"]) if r.get("videos"))
    media = media_records(row_messages(row, opts), opts.cache_dir, opts.video_spec(), opts.image_spec())
    run = tmp_path / "run"
    w = RolloutDumpWriter(run / "rollouts", DumpConfig(enable=True, every_n_steps=1), engine="local",
                          cache_dir=opts.cache_dir)  # fmt: skip
    w.start(1)
    for step in (1, 2):
        w.write_step(step, [_group(0, media=media), _group(1, media=media)])
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "critic/score/mean": s / 10, "val/accuracy": s / 5}) + "\n" for s in (1, 2))
    )
    (run / "rollouts" / "step-000002.jsonl").open("a").write("{not json\n")
    record = train_run_record(run)
    assert len(record.samples) == 4
    assert record.kind == "train"
    s = record.samples[0]
    assert s.step == 1
    assert s.verdict == "mixed"
    assert [r.source for r in s.responses] == ["online", "offline"]
    assert s.media[0].cache_root == str(Path(opts.cache_dir).resolve()) or s.media[0].cache_root == opts.cache_dir
    assert any("not JSON" in p for p in record.problems)
    metrics = {c.metric for c in record.curves}
    assert {"reward (dumped steps, online)", "accuracy (dumped steps, online)", "training reward (every step)",
            "held-out accuracy"} <= metrics  # fmt: skip
    assert main([str(run), "--out", str(tmp_path / "site")]) == 0
    index = Path(capsys.readouterr().out.strip())
    assert index == (tmp_path / "site" / "index.html").resolve()
    # the per-task table counts what the charts count (online responses), the stored answers apart
    page = index.read_text()
    assert "online responses</th>" in page
    assert "stored (offline) answers</th>" in page
    row = re.search(r"<tr><td>color</td>((?:<td[^>]*>[^<]*</td>){3})", page)
    assert row is not None
    assert re.findall(r">([^<]*)</td>", row.group(1)) == ["4", "1", "4"]  # not 8 responses at 0.5
    cards = json.loads((tmp_path / "site/data/run/chunk-00000.js").read_text().split(",", 1)[1][: -len(");\n")])[0]
    assert len(cards) == 4
    assert all(c.count("<img ") == len(media[0]["frame_indices"]) for c in cards)
    assert main([str(tmp_path / "nothing-here")]) == 2
    assert "no rollout dumps" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        find_rollouts(tmp_path)


def test_verl_fields_become_one_record_per_group(tmp_path: Path, make_opts: Any) -> None:
    torch = pytest.importorskip("torch")
    from evr1_train.rollouts.engines import verl_groups

    class Tok:
        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return "<answer>" + "ABCD"[ids[0]] + "</answer>"

    msgs = [{"role": "user", "content": [{"type": "text", "text": "Which?"}]}]
    data = {
        "uid": ["g0", "g0", "g1", "g1"],
        "responses": [torch.tensor([1, 9]), torch.tensor([2, 9]), torch.tensor([1]), torch.tensor([0, 9, 9])],
        "advantages": [torch.full((2,), 0.7), torch.full((2,), -0.7), torch.zeros(1), torch.zeros(3)],
        "extra_fields": [
            {"evr1_offline": 0, "reward_extra_info": {"score": 1.0, "accuracy": 1.0, "format": 1.0}},
            {
                "evr1_offline": 1,
                "evr1_hybrid_reason": "always",
                "reward_extra_info": {"score": 0.1, "accuracy": 0.0, "format": 1.0},
            },
            {"evr1_offline": 0, "reward_extra_info": {"score": 1.0, "accuracy": 1.0, "format": 1.0}},
            {"evr1_offline": 0, "reward_extra_info": {"score": 1.0, "accuracy": 1.0, "format": 1.0}},
        ],
        "raw_prompt": [msgs] * 4,
        "reward_model": [{"ground_truth": "B"}] * 4,
        "data_source": ["toy"] * 4,
        "extra_info": [{"problem_type": "multiple choice", "problem_id": "p0", "kind": "color"}] * 2
        + [{"problem_type": "multiple choice", "problem_id": "p1"}] * 2,
    }
    opts = make_opts()
    w = RolloutDumpWriter(tmp_path, DumpConfig(enable=True), engine="verl", cache_dir=opts.cache_dir)
    w.opts = opts
    groups = verl_groups(data, Tok(), w)
    assert [g["row_id"] for g in groups] == ["p0", "p1"]
    assert groups[0]["task"] == "color"
    g0 = groups[0]["responses"]
    assert [r["text"] for r in g0] == ["<answer>B</answer>", "<answer>C</answer>"]
    assert [r["offline"] for r in g0] == [False, True]
    assert g0[1]["details"] == {"hybrid": "always"}
    assert g0[0]["advantage"] == pytest.approx(0.7)
    assert g0[0]["reward"]["overall"] == 1.0
    assert g0[0]["extracted"] == "B"
    assert groups[0]["ground_truth"] == "B"


def _malformed(good: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(what is wrong, the record): each of the shapes that made `evr1-train view` fail as a whole before."""

    def response(**change: Any) -> dict[str, Any]:
        return {**good, "responses": [{**good["responses"][0], **change}]}

    media = {"kind": "video", "path": "x.mp4", "frames_from": "decoded"}
    return [
        ("step 'x'", {**good, "step": "x"}),
        ("step as a list", {**good, "step": [1]}),
        ("reward as a list", response(reward=[1.0, 0.0])),
        ("details as a string", response(details="oops")),
        ("text as a list", response(text=["<answer>B</answer>"])),
        ("responses as a string", {**good, "responses": "none"}),
        ("media as an object", {**good, "media": media}),
        ("frame_indices as text", {**good, "media": [{**media, "frame_indices": "0,1"}]}),
        ("a negative frame index", {**good, "media": [{**media, "frame_indices": [0, -3]}]}),
        ("timestamps not numbers", {**good, "media": [{**media, "frame_indices": [0], "timestamps": ["t"]}]}),
    ]


def test_view_skips_each_malformed_record_names_and_counts_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    w = RolloutDumpWriter(run / "rollouts", DumpConfig(enable=True, every_n_steps=1), engine="local")
    w.start(1)
    w.write_step(1, [_group(0), _group(1)])
    good = json.loads((run / "rollouts" / "step-000001.jsonl").read_text().splitlines()[0])
    bad = _malformed(good)
    with (run / "rollouts" / "step-000001.jsonl").open("a") as fh:
        fh.writelines(json.dumps(record) + "\n" for _, record in bad)
    (run / "metrics.jsonl").write_text(json.dumps({"step": "x", "val/accuracy": 0.5}) + "\n")  # an unplottable row
    record = train_run_record(run)
    assert len(record.samples) == 2  # the two good records
    skipped = [p for p in record.problems if "malformed record" in p]
    assert len(skipped) == len(bad)
    for line, (what, _) in enumerate(bad, start=3):  # each named by its file and line
        assert any(p.startswith(f"step-000001.jsonl:{line}: ") for p in skipped), what
    assert record.summary["malformed records skipped"] == len(bad)
    capsys.readouterr()
    assert main([str(run), "--out", str(tmp_path / "site")]) == 0  # before: exit 2 or a traceback in 7 of 9 cases
    err = capsys.readouterr().err
    assert err.count("malformed record") == len(bad)
    page = (tmp_path / "site" / "index.html").read_text()
    assert "malformed records skipped" in page
