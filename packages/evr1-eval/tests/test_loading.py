"""Loader: EasyVideoR1-style files with their unusual ground-truth wrappers, official layouts, and bad rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evr1_eval.benchmarks import get_benchmark
from evr1_eval.protocol import Evr1Settings, ProtocolSettings


def write_json(path: Path, rows: object) -> Path:
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def mc_row(pid: object, answer: str = "B", options: object = None, **extra: object) -> dict:
    row = {
        "problem": "<video>What happens first?",
        "options": ["A. a cat jumps", "B. a dog runs", "C. a bird sings", "D. nothing"] if options is None else options,
        "solution": f"<answer>{answer}</answer>",
        "problem_type": "multiple choice",
        "path": "clips/v1.mp4",
        "data_type": "video",
        **extra,
    }
    if pid is not None:
        row["problem_id"] = pid
    return row


def test_easyvideor1_mc_rows_parse_with_all_option_styles(tmp_path: Path) -> None:
    rows = [
        mc_row(7, "B"),
        mc_row(8, "C", options=["A: red", "B: green", "C: blue"]),
        mc_row(9, "(A)", options=["(A) left", "(B) right"]),
        mc_row(10, "right", options=["left", "right"]),  # plain option texts, answer given as text
        mc_row(11, "B. a dog runs"),  # answer written with its option text
    ]
    result = get_benchmark("videomme").load(write_json(tmp_path / "a.json", rows), tmp_path / "media")
    assert result.errors == []
    assert [s.id for s in result.samples] == ["7", "8", "9", "10", "11"]
    assert [s.ground_truth for s in result.samples] == ["B", "C", "A", "B", "B"]
    first = result.samples[0]
    assert first.videos == (str(tmp_path / "media" / "clips" / "v1.mp4"),)
    assert first.options == ("A. a cat jumps", "B. a dog runs", "C. a bird sings", "D. nothing")
    assert "<video>" not in first.prompt
    # the official protocol asks with Video-MME's own prompt (its README), options as "A. text" lines
    assert first.prompt == (
        "Select the best answer to the following multiple-choice question based on the video. Respond with only the "
        "letter (A, B, C, or D) of the correct option.\nWhat happens first?\nA. a cat jumps\nB. a dog runs\n"
        "C. a bird sings\nD. nothing\nThe best answer is:"
    )
    assert result.samples[1].options == ("A. red", "B. green", "C. blue")
    # a model family's published wording (Qwen3-VL's own Video-MME prompt) through a prompt variant
    qwen = get_benchmark("videomme").load(
        tmp_path / "a.json", None, protocol=ProtocolSettings(prompt_variant="qwen3_vl")
    )
    assert "\nQuestion: What happens first?\nA. a cat jumps" in qwen.samples[0].prompt
    generic = get_benchmark("videomme").load(
        tmp_path / "a.json", None, protocol=ProtocolSettings(prompt_variant="vlmevalkit")
    )
    assert generic.samples[0].prompt.startswith("Question: What happens first?\nOptions:\nA. a cat jumps")
    assert generic.samples[0].prompt.endswith("Answer with the option letter only.")


def test_charades_think_wrapper_with_placeholder_token_is_unwrapped(tmp_path: Path) -> None:
    row = {
        "problem": "When does the person open the door?",
        "solution": '<think>{"time": [12.5, 20.0], "boxes": {}}</think><[PLHD21_never_used_51bce0c785ca2f68081bfa7d91973934]>',
        "problem_type": "temporal grounding",
        "path": "AO8RW.mp4",
        "problem_id": "c0",
    }
    result = get_benchmark("charades_sta").load(write_json(tmp_path / "c.json", [row]), None)
    assert result.errors == []
    assert json.loads(result.samples[0].ground_truth) == {"time": [12.5, 20.0]}
    assert result.samples[0].videos == (str(tmp_path / "AO8RW.mp4"),)  # relative to the annotations' folder


def test_ids_fall_back_to_own_id_field_then_position(tmp_path: Path) -> None:
    rows = [mc_row(None, question_id="001-1"), mc_row(None), mc_row("p3")]
    result = get_benchmark("videomme").load(write_json(tmp_path / "a.json", rows), None)
    assert [s.id for s in result.samples] == ["001-1", "1", "p3"]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (mc_row(1, "E"), "not one of the option letters"),
        ({**mc_row(2), "solution": "<answer></answer>"}, "empty or never closed"),
        ({k: v for k, v in mc_row(3).items() if k != "solution"}, "missing ground truth"),
        ({k: v for k, v in mc_row(4).items() if k != "path"}, "missing video path"),
        ({**mc_row(5), "problem_type": "interpretive dance"}, "unknown problem_type"),
        ({**mc_row(6), "options": [], "problem": "Which?"}, "has no options"),
        ("just a string", "expected a JSON object"),
    ],
)
def test_bad_rows_are_reported_with_row_and_reason(tmp_path: Path, row: object, reason: str) -> None:
    rows = [mc_row(100), row, mc_row(101)]
    result = get_benchmark("lvbench").load(write_json(tmp_path / "bad.json", rows), None)
    assert [s.id for s in result.samples] == ["100", "101"]
    assert len(result.errors) == 1
    err = result.errors[0]
    assert err.row == 2  # the second item of the list (1-based, as every message counts)
    assert err.unit == "item"
    assert "bad.json item 2" in err.reason
    assert reason in err.reason


def test_grounding_and_numeric_truths_are_validated(tmp_path: Path) -> None:
    rows = [
        {
            "problem": "q",
            "problem_type": "temporal grounding",
            "path": "v.mp4",
            "solution": '<answer>{"time": [5, 2]}</answer>',
        },
        {
            "problem": "q",
            "problem_type": "temporal grounding",
            "path": "v.mp4",
            "solution": "<answer>not json</answer>",
        },
        {
            "problem": "q",
            "problem_type": "spatial-temporal grounding",
            "path": "v.mp4",
            "solution": '<answer>{"time": [1, 3], "boxes": {"1": [0, 0, 10]}}</answer>',
        },
        {"problem": "q", "problem_type": "regression", "path": "v.mp4", "solution": "<answer>three</answer>"},
        {"problem": "q", "problem_type": "regression", "path": "v.mp4", "solution": "<answer>1,250.5</answer>"},
    ]
    result = get_benchmark("vsibench").load(write_json(tmp_path / "g.json", rows), None)
    reasons = [e.reason for e in result.errors]
    assert len(reasons) == 3
    assert "reversed" in reasons[0]
    assert "not valid JSON" in reasons[1] or "JSON" in reasons[1]
    assert "box" in reasons[2]
    assert [s.ground_truth for s in result.samples] == ["3", "1250.5"]  # evr1-rewards reads number words too


def test_duplicate_ids_are_renamed_or_rejected_never_overwritten(tmp_path: Path) -> None:
    # LiveSports-3K's file reuses a problem_id for two different questions; an exact repeat is not a new sample.
    rows = [mc_row(1), mc_row(1, "C"), mc_row(1), mc_row(1, "D")]
    result = get_benchmark("livesports3k").load(write_json(tmp_path / "d.json", rows), None)
    assert [(s.id, s.ground_truth) for s in result.samples] == [("1", "B"), ("1#2", "C"), ("1#3", "D")]
    assert [w.row for w in result.warnings] == [2, 4]
    assert "d.json item 2: id '1' already used by item 1" in result.warnings[0].reason
    assert len(result.errors) == 1
    assert "d.json item 3: exact duplicate of item 1" in result.errors[0].reason


def test_single_option_rows_and_empty_caption_questions(tmp_path: Path) -> None:
    # MVBench/MotionBench files hold a few 1-option rows; Video-MMLU captions have an empty `problem`.
    one = get_benchmark("motionbench").load(write_json(tmp_path / "m.json", [mc_row(1, "A", options=["A. walk"])]))
    assert one.samples[0].options == ("A. walk",)
    cap = {
        "problem_id": "Y8",
        "problem": "",
        "problem_type": "caption",
        "solution": "A lecture on logs.",
        "path": "y.mp4",
    }
    mmlu = get_benchmark("videommlu").load(write_json(tmp_path / "c.json", [cap]))
    assert mmlu.samples[0].ground_truth == "A lecture on logs."
    assert "Describe the video in detail." in mmlu.samples[0].prompt
    assert (
        get_benchmark("videomme")
        .load(write_json(tmp_path / "e.json", [cap]))
        .errors[0]
        .reason.endswith("missing question text (`problem`)")
    )


def test_jsonl_with_a_torn_line_keeps_the_other_rows(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(mc_row(1)) + "\n" + '{"problem": "tor' + "\n" + json.dumps(mc_row(2)) + "\n")
    result = get_benchmark("odvbench").load(path, None)
    assert [s.id for s in result.samples] == ["1", "2"]
    assert result.errors[0].row == 2
    assert "a.jsonl line 2: not valid JSON" in result.errors[0].reason


def test_every_message_names_the_file_line_and_the_field_it_used(tmp_path: Path) -> None:
    """One numbering: a JSONL row is named by the line an editor shows (blank lines count), parse errors and row
    errors alike; a missing or empty truth names the field the file uses (`answer` here, not `solution`)."""
    good = {k: v for k, v in mc_row(1).items() if k != "solution"} | {"answer": "<answer>B</answer>"}
    empty = {**good, "problem_id": "2", "answer": ""}
    missing = {k: v for k, v in good.items() if k != "answer"} | {"problem_id": "3"}
    path = tmp_path / "rows.jsonl"
    lines = [json.dumps(good), "", "{torn", json.dumps(empty), json.dumps(missing)]
    path.write_text("\n".join(lines) + "\n")
    result = get_benchmark("odvbench").load(path, None)
    assert [s.id for s in result.samples] == ["1"]
    assert [(e.unit, e.row) for e in result.errors] == [("line", 3), ("line", 4), ("line", 5)]
    reasons = [e.reason for e in result.errors]
    assert reasons[0].startswith("rows.jsonl line 3: not valid JSON")
    assert reasons[1] == "rows.jsonl line 4: empty ground truth (`answer`)"
    assert reasons[2] == "rows.jsonl line 5: missing ground truth (neither `solution` nor `answer`)"


def test_data_wrapper_object_and_missing_file(tmp_path: Path) -> None:
    result = get_benchmark("minerva").load(write_json(tmp_path / "w.json", {"data": [mc_row(1)]}), None)
    assert len(result.samples) == 1
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_benchmark("minerva").load(tmp_path / "missing.json", None)


def test_official_mc_layouts(tmp_path: Path) -> None:
    rows = [
        # LongVideoBench: candidates + 0-based correct_choice
        {
            "id": "lvb1",
            "video_path": "x.mp4",
            "question": "Q?",
            "candidates": ["p", "q", "r"],
            "correct_choice": 2,
            "duration_group": 600,
            "question_category": "T3O",
        },
        # MVBench: answer is the option text
        {"video": "y.mp4", "question": "Q?", "candidates": ["up", "down"], "answer": "down"},
        # Video-MME: lettered options, letter answer, videoID without extension
        {
            "question_id": "001-2",
            "videoID": "fFjv93ACGo8",
            "question": "Q?",
            "options": ["A. a", "B. b", "C. c", "D. d"],
            "answer": "D",
            "duration": "short",
        },
        {"question": "Q?", "candidates": ["up", "down"], "answer": "sideways", "video": "z.mp4"},
    ]
    result = get_benchmark("longvideobench").load(write_json(tmp_path / "o.json", rows), Path("root"))
    assert [(s.id, s.ground_truth) for s in result.samples] == [("lvb1", "C"), ("1", "B"), ("001-2", "D")]
    assert result.samples[0].groups == {"duration_group": "600", "category": "T3O"}
    assert result.samples[2].videos == (str(Path("root").absolute() / "fFjv93ACGo8.mp4"),)
    assert "neither an option letter nor an option text" in result.errors[0].reason


def test_vsibench_official_layout_and_charades_txt(tmp_path: Path) -> None:
    rows = [
        {
            "id": 1,
            "dataset": "scannet",
            "scene_name": "scene0001_00",
            "question_type": "object_counting",
            "question": "How many chairs?",
            "options": None,
            "ground_truth": "4",
        },
        {
            "id": 2,
            "dataset": "arkitscenes",
            "scene_name": "41069025",
            "question_type": "route_planning",
            "question": "Which route?",
            "options": ["A. left", "B. right"],
            "ground_truth": "B",
        },
    ]
    vsi = get_benchmark("vsibench").load(write_json(tmp_path / "v.json", rows), None)
    assert [(s.problem_type, s.ground_truth, s.videos[0], s.groups["task"]) for s in vsi.samples] == [
        ("regression", "4", str(tmp_path / "scannet/scene0001_00.mp4"), "object_counting"),
        ("multiple_choice", "B", str(tmp_path / "arkitscenes/41069025.mp4"), "route_planning"),
    ]
    txt = tmp_path / "charades_sta_test.txt"
    txt.write_text("3MSZA 24.3 30.4##person turn a light on.\nbroken line\n")
    ch = get_benchmark("charades_sta").load(txt, None)
    assert json.loads(ch.samples[0].ground_truth) == {"time": [24.3, 30.4]}
    assert ch.samples[0].videos == (str(tmp_path / "3MSZA.mp4"),)
    assert "VIDEOID START END##sentence" in ch.errors[0].reason


def test_groups_from_fields_and_from_the_video_folder(tmp_path: Path) -> None:
    rows = [
        mc_row(1, path="./clevrer/video_validation/1.mp4"),
        mc_row(2, path="star/2.mp4", task_type="action_sequence"),
    ]
    result = get_benchmark("mvbench").load(write_json(tmp_path / "m.json", rows), None)
    assert [dict(s.groups) for s in result.samples] == [
        {"source": "clevrer"},
        {"task": "action_sequence", "source": "star"},
    ]
    mmvu = get_benchmark("mmvu").load(write_json(tmp_path / "u.json", [mc_row(1, path="./videos/Chemistry/0.mp4")]))
    assert mmvu.samples[0].groups["subject"] == "Chemistry"
    vm = get_benchmark("videommmu").load(write_json(tmp_path / "v.json", [mc_row(1, image_path="i.png"), mc_row(2)]))
    assert [s.groups.get("track") for s in vm.samples] == ["Adaptation", None]


def test_ovobench_forward_truths_and_videommmu_image(tmp_path: Path) -> None:
    rows = [
        {
            "problem": "How many?",
            "problem_type": "REC",
            "path": "v.mp4",
            "solution": "<answer>3</answer>",
            "ovo_task": "REC",
            "ovo_category": "forward",
            "problem_id": "r1",
        },
        {
            "problem": "Is it done?",
            "problem_type": "SSR",
            "path": "v.mp4",
            "solution": "<answer>Yes</answer>",
            "ovo_type": 1,
            "ovo_task": "SSR",
            "ovo_category": "forward",
            "problem_id": "s1",
        },
        {
            "problem": "Is it?",
            "problem_type": "CRR",
            "path": "v.mp4",
            "solution": "<answer>No</answer>",
            "ovo_task": "CRR",
            "ovo_category": "forward",
            "problem_id": "c1",
        },
    ]
    ovo = get_benchmark("ovobench").load(write_json(tmp_path / "ovo.json", rows), None)
    assert [(s.problem_type, s.ground_truth) for s in ovo.samples] == [("numerical", "3"), ("boolean", "yes"),
                                                                      ("boolean", "no")]  # fmt: skip
    mmmu = get_benchmark("videommmu").load(write_json(tmp_path / "vm.json", [mc_row(1, image_path="img/1.png")]), None)
    assert mmmu.samples[0].images == (str(tmp_path / "img/1.png"),)
    assert "image for this question is at the end of the video" in mmmu.samples[0].prompt


def test_evr1_protocol_asks_in_the_training_format(tmp_path: Path) -> None:
    protocol = ProtocolSettings(protocol="evr1")
    result = get_benchmark("lvbench").load(write_json(tmp_path / "a.json", [mc_row(1)]), None, protocol=protocol)
    # the row's question is "<video>What happens first?": the trainer keeps that marker where it is (the frames then
    # follow "Question: "), and so does the evr1 protocol
    assert result.samples[0].prompt == (
        "Watch the video carefully.\nQuestion: <video>What happens first?\nOptions:\nA. a cat jumps\nB. a dog runs\n"
        "C. a bird sings\nD. nothing\nThink step by step inside <think></think>, then give the option letter inside "
        "<answer></answer>."
    )
    direct = ProtocolSettings(protocol="evr1", evr1=Evr1Settings(think=False))
    result = get_benchmark("lvbench").load(tmp_path / "a.json", None, protocol=direct)
    assert result.samples[0].prompt.endswith("\nGive the option letter inside <answer></answer>.")
    with pytest.raises(ValueError, match="unknown prompt variant"):
        get_benchmark("lvbench").load(tmp_path / "a.json", None, protocol=ProtocolSettings(prompt_variant="poetry"))
    with pytest.raises(ValueError, match="unknown protocol"):
        ProtocolSettings(protocol="poetry")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("problem_type", "raw", "expected"),
    [
        ("multiple choice", "<answer>B</answer>", "B"),
        ("Multiple Choice", "<answer></answer><answer> C </answer>", "C"),
        ("temporal grounding", '<think>{"time": [1, 2]}</think><[PLHD21_x]>', '{"time": [1.0, 2.0]}'),
        ("numerical", "1,250", "1250"),
        ("open-ended", "  plain  ", "plain"),
    ],
)
def test_ground_truths_are_read_by_evr1_rewards(tmp_path: Path, problem_type: str, raw: str, expected: str) -> None:
    """The loader keeps no copy of the vocabulary or the truth readers: evr1-rewards' API reads them."""
    from evr1_rewards import normalize_problem_type, parse_ground_truth

    row = {"problem": "Q?", "problem_type": problem_type, "solution": raw, "path": "v.mp4"}
    if problem_type.lower() == "multiple choice":
        row["options"] = ["A. x", "B. y", "C. z"]
    sample = get_benchmark("longvideo_reason").load(write_json(tmp_path / "r.json", [row])).samples[0]
    assert sample.ground_truth == expected
    assert sample.problem_type == normalize_problem_type(problem_type)
    extras = {"options": row["options"]} if "options" in row else None
    assert sample.ground_truth == parse_ground_truth(problem_type, raw, extras).text


def test_problem_type_readings_and_option_layouts(tmp_path: Path) -> None:
    rows = [
        {"problem": "How many?", "problem_type": "REC", "solution": "<answer>3</answer>", "path": "a.mp4"},
        {"problem": "Step?", "problem_type": "SSR", "solution": "<answer>Yes</answer>", "path": "b.mp4"},
    ]
    ovo = get_benchmark("ovobench").load(write_json(tmp_path / "o.json", rows))
    assert [(s.problem_type, s.ground_truth) for s in ovo.samples] == [("numerical", "3"), ("boolean", "yes")]
    # without the benchmark's own reading, "REC" is ambiguous (referring expressions or repetition counting)
    other = get_benchmark("livesports3k").load(tmp_path / "o.json")
    assert len(other.errors) == 2
    assert "ambiguous" in other.errors[0].reason.lower()
    assert "repetition counting" in other.errors[0].reason
    assert "problem_type" in other.errors[1].reason or "SSR" in other.errors[1].reason
    layouts = [
        mc_row(1, "B", options={"A": "x", "B": "y"}),
        mc_row(2, "A", options=["A. a. b", "B. c"]),
        mc_row(3, "A", options=["A. x", "A. y"]),  # reasoning text split into fake options: a broken row
    ]
    loaded = get_benchmark("lvbench").load(write_json(tmp_path / "m.json", layouts))
    assert [s.options for s in loaded.samples] == [("A. x", "B. y"), ("A. a. b", "B. c")]
    assert len(loaded.errors) == 1
    assert "duplicate option letters" in loaded.errors[0].reason


def test_bare_queries_get_the_benchmark_question_template(tmp_path: Path) -> None:
    row = {
        "problem": "person turn a light on.",
        "problem_type": "temporal grounding",
        "path": "v.mp4",
        "solution": '{"time": [1, 2]}',
    }
    generic = ProtocolSettings(prompt_variant="vlmevalkit")
    sample = get_benchmark("charades_sta").load(write_json(tmp_path / "c.json", [row]), protocol=generic).samples[0]
    assert sample.prompt.startswith('Question: When does this happen in the video: "person turn a light on."?')
    official = get_benchmark("charades_sta").load(tmp_path / "c.json").samples[0]
    assert official.prompt.endswith(
        "the textual sentence: person turn a light on.. Please return its start time and end time."
    )  # fmt: skip  (lmms-eval's "{caption}. {post_prompt}")
    ssr = {"problem": "soak the rice", "problem_type": "SSR", "path": "v.mp4", "solution": "No", "ovo_task": "SSR"}
    sample = get_benchmark("ovobench").load(write_json(tmp_path / "o.json", [ssr]), protocol=generic).samples[0]
    assert '"soak the rice"' in sample.prompt
    assert sample.prompt.endswith("Answer with Yes or No only.")
    official = get_benchmark("ovobench").load(tmp_path / "o.json").samples[0]
    assert "procedures: \nsoak the rice\nYour task is to determine" in official.prompt


# -- TempCompass' official release: one nested document per question format -------------------------------------------
TEMPCOMPASS = {
    "multi-choice": {
        "101": {
            "direction": [
                {"question": "Where does the man move?\nA. left\nB. right\nC. away", "answer": "B. right"},
                # the release writes some options without a space after the letter
                {"question": "What happens first?\nA. dancing\nB. waving\nC.Both at once", "answer": "C.Both at once"},
            ]
        },
        "101_reverse": {"direction": [{"question": "Where?\nA. left\nB. right", "answer": "D. up"}]},
    },
    "yes_no": {"101": {"speed": [{"question": "Is the video slow?", "answer": "no"}]}},
    "caption_matching": {
        "101": {
            "action": [
                {
                    "question": "Which caption fits?\nOption 1: A man runs.\nOption 2: A man dunks.",
                    "answer": "Option 2: A man dunks.",
                },
                {
                    "question": "Which sentence fits?\nSentence A: A man dunks.\nSentence B: A man sleeps.",
                    "answer": "Sentence A: A man dunks.",
                },
            ]
        }
    },
    "captioning": {
        "101": {
            "action": [
                {
                    "question": "Describe it.\nInformation A: {'action': 'running'}\nInformation B: {'action': 'dunking'}"
                    "\nGenerated Caption:",
                    "answer": "B. dunking",
                }
            ]
        }
    },
}


def write_tempcompass(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for fmt, doc in TEMPCOMPASS.items():
        write_json(folder / f"{fmt}.json", doc)
    return folder


def test_tempcompass_official_documents_load_per_format(tmp_path: Path) -> None:
    bench = get_benchmark("tempcompass")
    folder = write_tempcompass(tmp_path / "questions")
    mc = bench.load(folder / "multi-choice.json", tmp_path / "videos")
    assert [s.id for s in mc.samples] == ["multi-choice/101/direction/0", "multi-choice/101/direction/1"]
    assert [s.ground_truth for s in mc.samples] == ["B", "C"]
    assert mc.samples[1].options == ("A. dancing", "B. waving", "C. Both at once")
    assert mc.samples[0].videos == (str(tmp_path / "videos" / "101.mp4"),)
    assert (
        mc.samples[0].prompt
        == "Where does the man move?\nA. left\nB. right\nC. away\nPlease directly give the best option:"
    )
    assert mc.samples[0].groups == {"dimension": "direction", "format": "multi-choice",
                                    "format_dimension": "multi-choice/direction"}  # fmt: skip
    # an answer outside the options is a reported row, not a silent drop
    assert len(mc.errors) == 1
    assert "multi-choice.json item 3" in mc.errors[0].reason
    assert "matches none of the options" in mc.errors[0].reason

    cm = bench.load(folder / "caption_matching.json")
    assert [(s.ground_truth, s.options) for s in cm.samples] == [
        ("B", ("A. A man runs.", "B. A man dunks.")),
        ("A", ("A. A man dunks.", "B. A man sleeps.")),
    ]
    yn = bench.load(folder / "yes_no.json")
    assert [(s.problem_type, s.ground_truth) for s in yn.samples] == [("boolean", "no")]
    cap = bench.load(folder / "captioning.json")
    assert cap.samples[0].problem_type == "open_ended"
    assert bench.sample_needs_judge(cap.samples[0])


def test_tempcompass_folder_loads_every_format_and_scores_format_average(tmp_path: Path) -> None:
    from evr1_eval.jobs import file_digest, load_job

    bench = get_benchmark("tempcompass")
    write_tempcompass(tmp_path / "ann" / "tempcompass")
    job = load_job(bench, tmp_path / "ann", tmp_path / "videos")
    assert len(job.samples) == 6
    assert len(job.load_errors) == 1
    assert sorted({s.groups["format"] for s in job.samples}) == ["caption_matching", "captioning", "multi-choice",
                                                                  "yes_no"]  # fmt: skip
    right = {"multi-choice/101/direction/0": "B", "multi-choice/101/direction/1": "A",
             "yes_no/101/speed/0": "No", "caption_matching/101/action/0": "Option 2",
             "caption_matching/101/action/1": "B"}  # fmt: skip
    scored = [bench.score(s, right[s.id]) for s in job.samples if s.id in right]
    summary = bench.aggregate(scored)
    assert summary.metrics["format/multi-choice"] == 50.0
    assert summary.metrics["format/yes_no"] == 100.0
    assert summary.metrics["format/caption_matching"] == 50.0
    assert summary.metrics["format_avg"] == pytest.approx(200 / 3)
    assert summary.metrics["accuracy"] == 60.0
    # the folder's digest (recorded in the run settings) follows every file in it
    before = file_digest(tmp_path / "ann" / "tempcompass")
    write_json(tmp_path / "ann" / "tempcompass" / "yes_no.json", {"101": {"speed": []}})
    assert file_digest(tmp_path / "ann" / "tempcompass") != before


def test_a_nested_document_is_refused_by_benchmarks_without_a_flattener(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mvbench.json", TEMPCOMPASS["yes_no"])
    with pytest.raises(ValueError, match="expected a list of rows"):
        get_benchmark("mvbench").load(path)
