"""The problem-type vocabulary and ground-truth parsing API that evr1-eval and evr1-train call."""

from __future__ import annotations

import pytest

from evr1_rewards import (
    AmbiguousProblemTypeError,
    GroundTruthError,
    RewardConfigError,
    UnknownProblemTypeError,
    available_types,
    get_scorer,
    normalize_problem_type,
    parse_ground_truth,
    parse_options,
    register,
    vocabulary,
)


def test_constants_name_every_builtin_scorer() -> None:
    constants = {
        getattr(vocabulary, n) for n in dir(vocabulary) if n.isupper() and isinstance(getattr(vocabulary, n), str)
    }
    assert constants == set(vocabulary.BUILTIN_TYPES)
    assert set(vocabulary.BUILTIN_TYPES) <= set(available_types())
    assert len(vocabulary.BUILTIN_TYPES) == 14


@pytest.mark.parametrize("canonical", vocabulary.BUILTIN_TYPES)
def test_every_builtin_alias_resolves_to_its_type(canonical: str) -> None:
    for alias in vocabulary.BUILTIN_ALIASES[canonical]:
        assert normalize_problem_type(alias) == canonical, alias
        assert normalize_problem_type(alias.upper().replace("_", " ")) == canonical, alias
    assert get_scorer(canonical).name == canonical


def test_name_key_ignores_case_spaces_hyphens_underscores_and_slashes() -> None:
    assert vocabulary.name_key(" Spatial-Temporal  Grounding ") == "spatial_temporal_grounding"
    assert vocabulary.name_key("yes/no") == "yes_no"
    assert normalize_problem_type("yes/no") == "boolean"


def test_rec_is_ambiguous_and_refused() -> None:
    # RefCOCO / VLM-R1: referring expression comprehension (a box); OVO-Bench: repetition counting (a count).
    for spelling in ("rec", "REC", " Rec "):
        with pytest.raises(AmbiguousProblemTypeError, match=r"referring_expression.*repetition_counting"):
            normalize_problem_type(spelling)
    with pytest.raises(UnknownProblemTypeError):  # an AmbiguousProblemTypeError is an UnknownProblemTypeError
        normalize_problem_type("rec")
    assert normalize_problem_type("referring expression") == "spatial_grounding"
    assert normalize_problem_type("repetition counting") == "numerical"


def test_caller_aliases_settle_a_name_in_context() -> None:
    ovo = {"REC": "repetition_counting", "SSR": "boolean", "CRR": "yes/no"}
    assert normalize_problem_type("REC", aliases=ovo) == "numerical"
    assert normalize_problem_type("ssr", aliases=ovo) == "boolean"
    assert normalize_problem_type("CRR", aliases=ovo) == "boolean"
    assert normalize_problem_type("multiple choice", aliases=ovo) == "multiple_choice"  # others as usual
    assert normalize_problem_type("REC", aliases={"rec": "referring_expression"}) == "spatial_grounding"
    with pytest.raises(RewardConfigError, match="not a known problem type"):
        normalize_problem_type("REC", aliases={"REC": "counting_of_reps"})
    with pytest.raises(UnknownProblemTypeError):  # aliases never leak into later calls
        normalize_problem_type("SSR")


def test_register_refuses_an_ambiguous_name() -> None:
    with pytest.raises(RewardConfigError, match="ambiguous"):

        @register("my_rec_scorer", aliases=("rec",))
        class _Scorer:
            name = "x"

            def parse_truth(self, ground_truth: object, extras: object) -> object:
                return ground_truth

            def score(self, response: object, truth: object, ctx: object) -> object:
                raise AssertionError


CANONICAL = [
    # (type, ground truth, extras, canonical text)
    ("multiple choice", "<answer>(b)</answer>", {"options": ["A. red", "B. blue"]}, "B"),
    ("multiple_choice", "blue", {"options": ["red", "blue"]}, "B"),
    ("numerical", "1,250", {}, "1250"),
    ("numerical", "0.50", {}, "0.50"),
    ("numerical", "50%", {}, "50%"),
    ("numerical", "twenty-one", {}, "21"),
    ("numerical", 3.5, {}, "3.5"),
    ("regression", "3.10", {}, "3.1"),
    ("boolean", "True", {}, "yes"),
    ("boolean", "0", {}, "no"),
    ("temporal grounding", '{"time": [12, 20.5]}', {}, '{"time": [12.0, 20.5]}'),
    ("spatial grounding", "[1, 2, 30, 40]", {}, '{"boxes": [1.0, 2.0, 30.0, 40.0]}'),
    ("tracking", {"boxes": {"0": [0, 0, 5, 5], "1.0": [1, 1, 6, 6]}}, {},
     '{"boxes": {"0": [0.0, 0.0, 5.0, 5.0], "1": [1.0, 1.0, 6.0, 6.0]}}'),
    ("llava", "Response 2", {}, "Response 2"),
    ("math", "$\\frac{3}{4}$", {}, "\\frac{3}{4}"),
    ("math", "C", {}, "C"),
    ("ocr", "  Exit 12B ", {}, "Exit 12B"),
]  # fmt: skip


@pytest.mark.parametrize(("ptype", "gt", "extras", "text"), CANONICAL)
def test_parse_ground_truth_gives_canonical_text_that_parses_back(ptype, gt, extras, text) -> None:
    parsed = parse_ground_truth(ptype, gt, extras)
    assert parsed.problem_type == normalize_problem_type(ptype)
    assert parsed.text == text
    again = parse_ground_truth(ptype, parsed.text, extras)
    assert again.value == parsed.value
    assert again.text == parsed.text


def test_wrappers_from_real_annotation_files_are_removed() -> None:
    # Charades-STA in EasyVideoR1's files: JSON inside <think>, a placeholder token, no answer tag.
    gt = parse_ground_truth("temporal grounding", '<think>{"time": [3.2, 9.0]}</think><[PLHD21_never_used_x]>')
    assert gt.value == (3.2, 9.0)
    assert parse_ground_truth("mcq", "<think>it is red</think>\n<answer>A</answer>").text == "A"
    assert parse_ground_truth("numerical", "<answer></answer><answer> 7 </answer>").text == "7"
    with pytest.raises(GroundTruthError, match="empty or never closed"):
        parse_ground_truth("numerical", "<answer>7")
    with pytest.raises(GroundTruthError, match="empty or never closed"):
        parse_ground_truth("ocr", "<answer> </answer>")


def test_none_extras_are_absent() -> None:
    gt = parse_ground_truth("numerical", "3", {"rel_tol": None, "abs_tol": None, "options": None})
    assert gt.extras == {}
    assert gt.value[1] == 1e-4  # the default tolerance
    assert parse_ground_truth("regression", "3", {"official": None}).value[1] is False
    assert parse_ground_truth("spatial grounding", "[0, 0, 2, 2]", {"image_size": None, "box_format": None}).text


def test_bad_ground_truths_raise_with_the_reason() -> None:
    with pytest.raises(GroundTruthError, match="not one of the option letters"):
        parse_ground_truth("mcq", "F", {"options": ["A. x", "B. y"]})
    with pytest.raises(GroundTruthError, match="does not contain a number"):
        parse_ground_truth("numerical", "many")
    with pytest.raises(GroundTruthError, match="non-negative number"):
        parse_ground_truth("numerical", "3", {"rel_tol": "tight"})
    with pytest.raises(UnknownProblemTypeError, match="Did you mean"):
        parse_ground_truth("numericl", "3")


@pytest.mark.parametrize(
    ("options", "letters", "items"),
    [
        (["A. red", "B. blue"], "AB", (("A", "red"), ("B", "blue"))),
        (["(A) red", "(B) blue"], "AB", (("A", "red"), ("B", "blue"))),
        (["A: red", "B: blue"], "AB", (("A", "red"), ("B", "blue"))),
        (["red", "blue", "green"], "ABC", (("A", "red"), ("B", "blue"), ("C", "green"))),
        ({"A": "red", "B": "blue"}, "AB", (("A", "red"), ("B", "blue"))),
        ("A. red\nB. blue\n", "AB", (("A", "red"), ("B", "blue"))),
        # one lettered-looking option among plain ones is not a letter: "C. elegans" stays the text of option A
        (["C. elegans", "E. coli"], "AB", (("A", "C. elegans"), ("B", "E. coli"))),
        (None, "ABCDEFGHIJ", ()),
        ([], "ABCDEFGHIJ", ()),
    ],
)
def test_parse_options(options, letters: str, items: tuple) -> None:
    choices = parse_options(options)
    assert choices.letters == letters
    assert choices.items == items


def test_parse_options_refuses_duplicates_and_nested_values() -> None:
    with pytest.raises(GroundTruthError):
        parse_options({"A": "x", "a": "y"})
    with pytest.raises(GroundTruthError):
        parse_options([["red"], ["blue"]])


def test_each_scorer_carries_the_answer_format_the_prompt_asks_for() -> None:
    """One definition: the format is registered with the scorer and read through `answer_format` by both engines."""
    from evr1_rewards import UnknownProblemTypeError, answer_format, describe_types
    from evr1_rewards.prompt_format import DEFAULT_ANSWER_FORMAT, answer_formats

    formats = answer_formats()
    assert set(vocabulary.BUILTIN_TYPES) <= set(formats)
    assert formats == {info.name: info.answer_format or DEFAULT_ANSWER_FORMAT for info in describe_types()}
    assert answer_format("mcq") == formats["multiple_choice"] != DEFAULT_ANSWER_FORMAT  # aliases resolve
    assert formats["open_ended"] == DEFAULT_ANSWER_FORMAT  # free text: no format to ask for
    assert "JSON" in formats["temporal_grounding"]
    with pytest.raises(UnknownProblemTypeError):
        answer_format("colour naming")


def test_option_lines_render_a_rows_options_column_one_way_for_both_engines() -> None:
    """`option_lines` is the one reading of a row's `options` (evr1-train's prompt builder and evr1-eval's `evr1`
    protocol both call it): lists as given, mappings as `key. value`, a bare value as one line, empty as none."""
    from evr1_rewards.prompt_format import option_lines, render_prompt

    assert option_lines(["A. red", "B. blue"]) == ["A. red", "B. blue"]
    assert option_lines(("A. red", 2)) == ["A. red", "2"]
    assert option_lines({"A": "left", "B": "right"}) == ["A. left", "B. right"]
    assert option_lines("A. only") == ["A. only"]
    assert option_lines(None) == option_lines([]) == option_lines({}) == []
    text = render_prompt("mcq", "Pick one.", option_lines({"A": "left"}), n_videos=0, n_images=0, think=False)
    assert "\nOptions:\nA. left\n" in text
