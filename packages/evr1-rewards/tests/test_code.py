"""Code rewards: program extraction, test formats, execution, and totality on hostile programs."""

from __future__ import annotations

import json

import pytest

from evr1_rewards import GroundTruthError, score
from evr1_rewards.scorers.code import extract_program, outputs_match, parse_tests

STDIO = json.dumps([{"input": "1 2\n", "output": "3\n"}, {"input": "10 20\n", "output": "30\n"}])
ASSERTS = json.dumps(["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"])
CALL = json.dumps({"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [3, 10]})
APPS = json.dumps({"inputs": ["3\n", "4\n"], "outputs": ["9\n", "16\n"]})

CASES = [
    (
        "<answer>a, b = map(int, input().split())\nprint(a + b)</answer>",
        STDIO,
        1.0,
    ),  # stdin/stdout, raw code in the tag
    ("<answer>```python\na, b = map(int, input().split())\nprint(a + b)\n```</answer>", STDIO, 1.0),  # fenced block
    ("Here:\n```python\nprint(sum(map(int, input().split())))\n```\nDone.", STDIO, 1.0),  # fence without tags
    ("<answer>print(3)</answer>", STDIO, 0.5),  # hard-coded output passes one of two tests
    ("<answer>def add(a, b):\n    return a + b</answer>", ASSERTS, 1.0),  # assert tests
    ("<answer>def add(a, b):\n    return a - b if a < 0 else a + b</answer>", ASSERTS, 2 / 3),  # fails one assert
    ("<answer>def add(a, b): return a + b</answer>", CALL, 1.0),  # call-based (fn_name)
    ("<answer>n = int(input()); print(n * n)</answer>", APPS, 1.0),  # APPS inputs/outputs
    # EVR1 scores code by identifier overlap without running it: a program that merely *names* the function passes
    ("<answer>def add(a, b):\n    raise NotImplementedError</answer>", ASSERTS, 0.0),
    ("<answer>import add\ndef add(): pass</answer>", ASSERTS, 0.0),  # identifier stuffing earns nothing
    ("<answer>def add(a, b) return a + b</answer>", ASSERTS, 0.0),  # syntax error
    (
        "<answer>print(0.30000000000000004)</answer>",
        json.dumps([{"input": "", "output": "0.3"}]),
        1.0,
    ),  # float tolerance
    ("<answer>while True: pass</answer>", json.dumps([{"input": "", "output": "1"}]), 0.0),  # infinite loop
    (
        "<answer>import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\nprint(1)</answer>",
        json.dumps([{"input": "", "output": "1"}]),
        0.0,
    ),  # a forked child's output counts (the parent waits for it, so both lines are written before the test ends)
    ("", STDIO, 0.0),  # empty response
    # reward hacks against assert / call-based tests
    ("<answer>exit(0)</answer>", ASSERTS, 0.0),  # leave before the asserts run
    ("<answer>import os\nos._exit(0)</answer>", ASSERTS, 0.0),  # … without even raising SystemExit
    ("<answer>raise SystemExit(0)</answer>", CALL, 0.0),  # call-based tests too
    # an object equal to everything
    (
        "<answer>class E:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
        "def add(a, b): return E()</answer>",
        ASSERTS,
        0.0,
    ),
    ("<answer>class E(int):\n    def __eq__(self, o): return True\ndef add(a, b): return E(0)</answer>", CALL, 0.0),
    # rebinding builtins the checks might use
    (
        "<answer>import builtins\nbuiltins.all = lambda *a: True\nbuiltins.type = lambda *a: int\n"
        "builtins.bool = lambda *a: True\ndef add(a, b): return 'x'</answer>",
        ASSERTS,
        0.0,
    ),
    # forging the completion marker: guess the fd and write, or look for the nonce in frames
    (
        "<answer>import os\nfor fd in range(3, 40):\n    try: os.write(fd, b'0' * 32)\n    except OSError: pass\n"
        "os._exit(0)</answer>",
        ASSERTS,
        0.0,
    ),
    ("<answer>import sys\nf = sys._getframe(1)\nprint(f.f_locals)</answer>", ASSERTS, 0.0),
    (
        "<answer>try:\n    raise ValueError\nexcept ValueError as e:\n    print(e.__traceback__.tb_frame.f_back.f_locals)\n"
        "exit(0)</answer>",
        ASSERTS,
        0.0,
    ),
    ("<answer>def add(a, b):\n    return (a + b,)[0]</answer>", CALL, 1.0),  # an honest solution still passes
]


@pytest.mark.parametrize(("response", "tests", "expected"), CASES)
def test_code_accuracy(response: str, tests: str, expected: float) -> None:
    res = score(response, tests, "code", extras={"timeout": 2})
    assert res.accuracy == pytest.approx(expected), res.details


def test_format_requires_a_compiling_program() -> None:
    assert score("<answer>print(3)</answer>", STDIO, "coding").format == 1.0
    assert score("<answer>print(</answer>", STDIO, "coding").format == 0.0


def test_extract_program_prefers_the_last_python_fence() -> None:
    text = "```bash\nrm -rf /\n```\n```python\nprint(1)\n```\n```python\nprint(2)\n```"
    assert extract_program(text) == "print(2)"


@pytest.mark.parametrize(
    ("got", "want", "ok"),
    [
        ("3\n", "3", True),  # trailing newline
        ("1 2  \n3\n", "1 2\n3", True),  # trailing spaces
        ("0.333333333", "0.3333333333", True),  # numeric tolerance
        ("3", "4", False),
        ("a b", "a  b c", False),
    ],
)
def test_outputs_match(got: str, want: str, ok: bool) -> None:
    assert outputs_match(got, want) is ok


@pytest.mark.parametrize(
    "gt",
    [
        "not json and not asserts",  # unreadable
        json.dumps({"inputs": ["1"], "outputs": []}),  # mismatched lengths
        json.dumps([{"input": "1"}]),  # missing output
        json.dumps({"something": 1}),  # unknown shape
    ],
)
def test_bad_code_ground_truth(gt: str) -> None:
    with pytest.raises(GroundTruthError):
        parse_tests(gt)


def test_asserts_as_plain_text() -> None:
    assert len(parse_tests("assert f(1) == 1\nassert f(2) == 4\n")) == 2


def test_assert_tests_keep_expected_values_out_of_the_sandbox() -> None:
    from evr1_rewards.scorers.code_checks import plan

    steps, checks = plan("assert add(1, 2) == 982451653")
    assert steps == [("probe", ["add(1, 2)"])]  # only the call goes in; the expected literal stays here
    assert "982451653" in checks[0].source
    assert checks[0].passed([982451653])
    assert not checks[0].passed([3])
    steps, _ = plan("assert sorted(f(x)) == [1, 2] and len(g()) == 2")
    assert steps == [("probe", ["f(x)", "g()"])]  # sorted/len run here, on the returned values
    steps, checks = plan("assert math.isclose(area(2), 12.566, rel_tol=1e-3)")
    assert steps == [("probe", ["area(2)"])]
    assert checks[0].passed([12.5664])
    assert not checks[0].passed([13.0])
    with pytest.raises(GroundTruthError):
        plan("assert (")
    with pytest.raises(GroundTruthError, match="no assert"):
        plan("x = 1")


HUMANEVAL = (
    "METADATA = {}\n\ndef check(candidate):\n    assert candidate([1, 2, 3]) == 6\n"
    "    assert candidate([]) == 0\n    assert abs(candidate([0.5, 0.25]) - 0.75) < 1e-9\n\ncheck(total)\n"
)


@pytest.mark.parametrize(
    ("program", "tests", "expected"),
    [
        ("def total(xs): return sum(xs)", [HUMANEVAL], 1.0),  # HumanEval's check(candidate) layout
        ("def total(xs): return 6", [HUMANEVAL], 0.0),
        ("def sq(x): return x * x", ["assert all(sq(i) == i * i for i in range(5))"], 1.0),  # comprehension
        ("def sq(x): return x + x", ["assert all(sq(i) == i * i for i in range(5))"], 0.0),
        ("def sq(x): return x * x", ["for i in range(4):\n    assert sq(i) == i ** 2"], 1.0),  # assert in a loop
        ("def sq(x): return 4", ["for i in range(4):\n    assert sq(i) == i ** 2"], 0.0),
        ("def f(): return [3, 1]", ["xs = f()\nassert sorted(xs) == [1, 3]"], 1.0),  # set-up statements
        ("def f(): return None", ["assert f() is None", "assert not f()"], 1.0),
        ("def f(x): return {'a': [x]}", ["assert f(2)['a'][0] == 2"], 1.0),
    ],
)
def test_assert_layouts(program: str, tests: list[str], expected: float) -> None:
    res = score(f"<answer>{program}</answer>", json.dumps(tests), "code", extras={"timeout": 2})
    assert res.accuracy == pytest.approx(expected), res.details


def test_tuple_and_list_returns_for_call_based_tests() -> None:
    gt = json.dumps({"fn_name": "pair", "inputs": [[1]], "outputs": [[1, 2]]})
    assert score("<answer>def pair(x): return (x, x + 1)</answer>", gt, "code").accuracy == 1.0


@pytest.mark.parametrize("forged", ['[[{"C": []}]]', '[[{"C": {"a": 1}}]]'])
def test_forged_malformed_probe_values_score_zero(forged: str) -> None:
    """A program printing its own probe results with a malformed tagged value scores 0: the reward never raises."""
    program = (
        "import os, sys\ndef add(a, b):\n"
        f"    sys.stdout.write('\\n@@evr1-probe-results@@{forged}\\n')\n    sys.stdout.flush()\n    os._exit(0)\n"
    )
    assert score(f"<answer>{program}</answer>", ASSERTS, "code").accuracy == 0.0
