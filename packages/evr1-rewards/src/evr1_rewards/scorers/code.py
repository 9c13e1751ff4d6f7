"""Code: run the extracted program against the ground-truth tests in the sandbox; accuracy = fraction passed.

Ground truth (a list or its JSON string, optionally inside `<answer>` tags):
- stdin/stdout pairs: `[{"input": "1 2\\n", "output": "3\\n"}, …]` (also `stdin`/`stdout` keys), or
  `{"inputs": [...], "outputs": [...]}` (APPS / CodeContests);
- call-based: `{"fn_name": "add", "inputs": [[1, 2], …], "outputs": [3, …]}`;
- assert statements: `["assert add(1, 2) == 3", …]` or `{"asserts": [...]}` (each assert is its own test).
Outputs match after trimming trailing whitespace per line; otherwise token by token with numbers equal to 1e-6.
Every test runs in a fresh forked child of one sandboxed interpreter per program (`sandbox.run_tests`). Asserts are
rewritten to demand built-in values, and test code must run to its end (a nonce proves it), so `exit(0)` before the
tests or an object whose `__eq__` always returns True passes nothing.
The program is the last fenced code block of the answer (```python … ```), else the whole answer; it must compile for
the format score. extras: `timeout` (CPU s per test, default 5), `memory_mb` (default 1024), `max_tests`.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response
from evr1_rewards.registry import register
from evr1_rewards.sandbox import SandboxLimits, run_tests
from evr1_rewards.truth import extra_float, truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import CODE

MAX_PROGRAM_CHARS = 200_000
_FENCE = re.compile(r"```[ \t]{0,4}([A-Za-z0-9_+-]{0,20})[ \t]{0,4}\n")


@dataclass(frozen=True, slots=True)
class Test:
    """One test: stdin → expected stdout, or a Python snippet appended to the program that must exit 0."""

    stdin: str = ""
    expected: str | None = None
    suffix: str | None = None


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
        text = truth_text(obj)
        try:
            obj = json.loads(text)
        except ValueError:
            if text.lstrip().startswith("assert"):
                obj = [line for line in text.splitlines() if line.strip()]
            else:
                raise GroundTruthError(f"code ground truth is neither JSON tests nor asserts: {text[:120]!r}") from None
    tests: list[Test] = []
    if isinstance(obj, Mapping):
        if "asserts" in obj:
            obj = list(obj["asserts"])  # type: ignore[call-overload]
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
                    # Built-in values compared with built-in ==: a rigged __eq__ cannot pass (see _sandbox_child).
                    check = f"__evr1_eq(__got, {out!r})"
                    if isinstance(out, list) and len(out) == 1:
                        check += f" or __evr1_eq(__got, {out[0]!r})"  # APPS wraps single return values in a list
                    tests.append(
                        Test(suffix=f"__got = {call}\nif type(__got) is tuple: __got = list(__got)\nassert {check}\n")
                    )
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
            tests.append(Test(suffix=harden_asserts(t)))
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


def _num(tok: str) -> float | None:
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def outputs_match(got: str, want: str) -> bool:
    """Equal after trimming trailing whitespace per line, or token by token with numbers equal to 1e-6."""
    if _lines(got) == _lines(want):
        return True
    a, b = got.split(), want.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=False):
        if x == y:
            continue
        fx, fy = _num(x), _num(y)
        if fx is None or fy is None or not math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6):
            return False
    return True


class _Harden(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
            test: ast.expr = ast.Call(ast.Name("__evr1_eq", ast.Load()), [t.left, t.comparators[0]], [])
        else:
            test = ast.Call(ast.Name("__evr1_truth", ast.Load()), [t], [])
        return ast.copy_location(ast.Assert(test, node.msg), node)


def harden_asserts(source: str) -> str:
    """`assert a == b` → `assert __evr1_eq(a, b)`, `assert e` → `assert __evr1_truth(e)`: both demand built-in
    values, so a program returning an object whose `__eq__`/`__bool__` always says yes passes nothing."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise GroundTruthError(f"code test is not valid Python ({e.msg}): {source[:120]!r}") from None
    return ast.unparse(ast.fix_missing_locations(_Harden().visit(tree))) + "\n"


def run_tests_of(program: str, tests: list[Test], limits: SandboxLimits) -> list[bool]:
    """Pass/fail per test: exit 0 in time, test code (if any) completed, stdout matching (if expected)."""
    results = run_tests(program, [t.stdin for t in tests], limits, [t.suffix for t in tests])
    return [
        r.ok and (t.expected is None or outputs_match(r.stdout, t.expected))
        for t, r in zip(tests, results, strict=True)
    ]


@register(CODE)
class Code:
    """Fraction of tests passed by the program, run in the sandbox (never trusted)."""

    name = "code"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> tuple[list[Test], SandboxLimits]:
        tests = parse_tests(ground_truth)
        cpu = extra_float(extras, "timeout", 5.0)
        mem = extra_float(extras, "memory_mb", 1024.0)
        max_tests = int(extra_float(extras, "max_tests", 1000.0))
        limits = SandboxLimits(
            cpu_seconds=max(1, math.ceil(cpu)), wall_seconds=2 * cpu + 2, memory_bytes=int(mem) << 20
        )
        return tests[:max_tests], limits

    def score(self, response: Response, truth: tuple[list[Test], SandboxLimits], ctx: Context) -> Outcome:
        tests, limits = truth
        cand = response.extraction()
        program = extract_program(cand.text)
        if not compiles(program):
            return Outcome(0.0, False, {"source": cand.source, "compiles": False, "passed": 0, "tests": len(tests)})
        passed = sum(run_tests_of(program, tests, limits))
        return Outcome(passed / len(tests), True, {"source": cand.source, "passed": passed, "tests": len(tests)})
