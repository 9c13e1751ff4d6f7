"""Code: run the extracted program against the ground-truth tests behind the sandbox boundary; accuracy = the
fraction of tests passed.

Ground truth (a list or its JSON string, optionally inside `<answer>` tags):
- stdin/stdout pairs: `[{"input": "1 2\\n", "output": "3\\n"}, …]` (also `stdin`/`stdout` keys), or
  `{"inputs": [...], "outputs": [...]}` (APPS / CodeContests);
- call-based: `{"fn_name": "add", "inputs": [[1, 2], …], "outputs": [3, …]}`;
- assert tests: `["assert add(1, 2) == 3", …]`, `{"asserts": [...]}` or one test source with several asserts
  (HumanEval's `def check(candidate): …` + `check(fn)` included); each string is one test.

The checker never runs inside the program's interpreter (`evr1_rewards.sandbox`): each test is one sandbox run,
and what comes back — stdout, or the plain values of the test's probe expressions (`code_checks`) — is compared
here. Stdout matches after trimming trailing whitespace per line, else token by token with numbers equal to 1e-6.
The tests of one answer run in parallel up to the sandbox's worker limit; the whole answer has a deadline.
The program is the last fenced code block of the answer (```python … ```), else the whole answer; it must compile
for the format score. extras: `timeout` (CPU s per test, default 5), `memory_mb` (default 1024), `max_tests`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.numbers import finite_float
from evr1_rewards.registry import register
from evr1_rewards.sandbox import Job, RunResult, SandboxConfig, SandboxLimits, run_jobs
from evr1_rewards.sandbox.types import Step
from evr1_rewards.sandbox.values import decode_steps
from evr1_rewards.scorers.code_checks import Check, check_all, plan, values_equal
from evr1_rewards.truth import extra_float, truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import CODE

MAX_PROGRAM_CHARS = 200_000
_FENCE = re.compile(r"```[ \t]{0,4}([A-Za-z0-9_+-]{0,20})[ \t]{0,4}\n")


@dataclass(frozen=True)
class Test:
    """One test: stdin -> expected stdout; or probe steps + parent-side checks (asserts); or a call + its value."""

    stdin: str = ""
    expected: str | None = None
    steps: tuple[Step, ...] | None = None
    checks: tuple[Check, ...] = ()
    returns: object = None
    """Call-based tests: the expected return value (the one probe step holds the call)."""
    call: bool = False

    def job(self, program: str) -> Job:
        return Job(program, self.stdin, self.steps)

    def passed(self, r: RunResult) -> bool:
        if not r.ok:
            return False
        if self.steps is None:
            return self.expected is None or outputs_match(r.stdout, self.expected)
        n_probe_steps = sum(1 for kind, _ in self.steps if kind == "probe")
        values = decode_steps(r.probes, n_probe_steps)
        if values is None:
            return False
        if self.call:
            return len(values) == 1 and len(values[0]) == 1 and values_equal(values[0][0], self.returns)
        return check_all(self.checks, values)


def extract_program(text: str) -> str:
    """The last fenced block (```python … ```, any language tag), else the text itself."""
    last: str | None = None
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            break
        end = text.find("```", m.end())
        if end < 0:
            break
        if m.group(1).lower() in ("", "python", "py", "python3"):
            last = text[m.end() : end]
        pos = end + 3
    return (last if last is not None else text).strip("\n")


def compiles(program: str) -> bool:
    if not program.strip() or len(program) > MAX_PROGRAM_CHARS:
        return False
    try:
        compile(program, "<answer>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def _as_text(v: object) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(_as_text(x) for x in v)
    return json.dumps(v)


def parse_tests(ground_truth: object) -> list[Test]:
    """Tests from any of the supported ground-truth shapes (see the module docstring)."""
    obj = ground_truth
    if isinstance(obj, (str, bytes)):
        text = truth_text(obj, fold=False)
        try:
            obj = json.loads(text)
        except ValueError:
            if text.lstrip().startswith("assert"):
                obj = [line for line in text.splitlines() if line.strip()]
            elif "assert" in text and "\n" in text:
                obj = [text]  # one test source (set-up + asserts, HumanEval's check function)
            else:
                raise GroundTruthError(f"code ground truth is neither JSON tests nor asserts: {text[:120]!r}") from None
    tests: list[Test] = []
    if isinstance(obj, Mapping):
        if "asserts" in obj:
            asserts = obj["asserts"]
            obj = [asserts] if isinstance(asserts, str) else list(asserts) if isinstance(asserts, list) else None
        elif "inputs" in obj and "outputs" in obj:
            ins, outs = obj["inputs"], obj["outputs"]
            if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
                raise GroundTruthError("code ground truth 'inputs' and 'outputs' must be lists of equal length")
            fn = obj.get("fn_name")
            if fn:
                if not isinstance(fn, str) or not fn.isidentifier():
                    raise GroundTruthError(f"code ground truth fn_name {fn!r} is not a Python identifier")
                for args, out in zip(ins, outs, strict=False):
                    call = f"{fn}(*{args!r})" if isinstance(args, list) else f"{fn}({args!r})"
                    # The call runs in the sandbox; its plain return value is compared here (values_equal).
                    tests.append(Test(steps=(("probe", [call]),), returns=out, call=True))
            else:
                tests = [Test(stdin=_as_text(i), expected=_as_text(o)) for i, o in zip(ins, outs, strict=False)]
            return _nonempty(tests)
        else:
            raise GroundTruthError(
                f"code ground truth object needs 'inputs'+'outputs' or 'asserts', got keys {sorted(obj)}"
            )
    if not isinstance(obj, list):
        raise GroundTruthError(f"code ground truth must be a list of tests, got {type(obj).__name__}")
    for t in obj:
        if isinstance(t, str):
            steps, checks = plan(t)
            tests.append(Test(steps=tuple(steps), checks=tuple(checks)))
        elif isinstance(t, Mapping):
            i = t.get("input", t.get("stdin"))
            o = t.get("output", t.get("stdout", t.get("expected_output")))
            if i is None or o is None:
                raise GroundTruthError(f"code test needs 'input' and 'output', got keys {sorted(t)}")
            tests.append(Test(stdin=_as_text(i), expected=_as_text(o)))
        else:
            raise GroundTruthError(f"code test must be an assert string or an input/output object, got {t!r}")
    return _nonempty(tests)


def _nonempty(tests: list[Test]) -> list[Test]:
    if not tests:
        raise GroundTruthError("code ground truth has no tests")
    return tests


def _lines(s: str) -> list[str]:
    return [line.rstrip() for line in s.strip().splitlines()]


_INT = re.compile(r"[-+]?\d+")


def outputs_match(got: str, want: str) -> bool:
    """Equal after trimming trailing whitespace per line, or token by token with numbers equal to 1e-6 — except that
    an expected integer needs exactly that integer (`1000000001` is not `1000000000`, `1e9` is not `1000000000`: a
    relative tolerance on large integers, or float notation for them, would accept wrong answers)."""
    if _lines(got) == _lines(want):
        return True
    a, b = got.split(), want.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=False):
        if x == y:
            continue
        if _INT.fullmatch(y):
            if not _INT.fullmatch(x) or int(x) != int(y):
                return False
            continue
        fx, fy = finite_float(x), finite_float(y)
        if fx is None or fy is None or not math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6):
            return False
    return True


def run_tests_of(
    program: str, tests: Sequence[Test], limits: SandboxLimits, sandbox: SandboxConfig | None = None
) -> list[bool]:
    """Pass/fail per test. The tests run in parallel up to the sandbox's worker limit; the answer as a whole gets
    one wall budget (`len(tests) * wall` / workers, at least one test's wall), so sleeping costs one timeout."""
    answer = limits.wall_seconds * max(1.0, math.ceil(len(tests) / 2)) + 2.0
    results = run_jobs([t.job(program) for t in tests], limits, sandbox, answer_seconds=answer)
    return [t.passed(r) for t, r in zip(tests, results, strict=True)]


CodeTruth = tuple[list[Test], SandboxLimits]


@register(CODE, answer_format="the complete program, without Markdown fences")
class Code:
    """Fraction of tests passed by the program, run behind the sandbox boundary (never trusted)."""

    name = "code"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> CodeTruth:
        tests = parse_tests(ground_truth)
        cpu = extra_float(extras, "timeout", 5.0)
        mem = extra_float(extras, "memory_mb", 1024.0)
        max_tests = int(extra_float(extras, "max_tests", 1000.0))
        limits = SandboxLimits(
            cpu_seconds=max(1, math.ceil(cpu)), wall_seconds=2 * cpu + 2, memory_bytes=int(mem) << 20
        )
        return tests[:max_tests], limits

    def score(self, response: Response, truth: CodeTruth, ctx: Context) -> Outcome:
        tests, limits = truth
        cand = response.extraction()
        program = extract_program(cand.text)
        if not compiles(program):
            return Outcome(0.0, False, {"source": cand.source, "compiles": False, "passed": 0, "tests": len(tests)})
        passed = sum(run_tests_of(program, tests, limits, ctx.sandbox))
        return Outcome(passed / len(tests), True, {"source": cand.source, "passed": passed, "tests": len(tests)})
