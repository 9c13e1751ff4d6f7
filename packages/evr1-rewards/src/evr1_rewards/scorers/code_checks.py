"""Assert tests checked in the parent: the program only ever computes values, never verdicts.

`plan(test_source)` splits a test (`assert add(1, 2) == 3`, HumanEval's `def check(candidate): …; check(add)`,
set-up statements between asserts) into sandbox *steps* and parent-side *checks*:

- the parts of an assert that need the program — calls of its functions, its names, anything not in the small
  expression language below — become *probe* expressions the sandbox evaluates and returns as plain data;
- everything else — literals (the expected values), comparisons, `not`/`and`/`or`, arithmetic, indexing and a
  whitelist of pure built-ins (`len`, `sorted`, `abs`, `round`, `set`, `math.isclose`, …) — is evaluated here, in
  the parent, on the decoded values. Expected literals never enter the sandbox; a program's object with a rigged
  `__eq__` never reaches a comparison (only built-in values come back).

`assert all(f(x) == y for x, y in PAIRS)`: a comprehension is evaluated in the sandbox as a list of (left, right)
pairs and compared here. Asserts nested in loops or functions other than HumanEval's `check` are run the same way,
as recorded (left, right) pairs. In those two forms the right-hand side is computed inside the sandbox (it may
depend on loop variables), so it is visible to the program; the comparison still happens here.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.sandbox.types import Step

MAX_SEQ = 1_000_000
"""Sequence repetition / shifts / powers in a check are bounded (the operands may come from the program)."""

_SAFE_CALLS: dict[str, Callable[..., Any]] = {
    "abs": abs, "all": all, "any": any, "bool": bool, "dict": dict, "divmod": divmod, "float": float,
    "frozenset": frozenset, "int": int, "len": len, "list": list, "max": max, "min": min, "reversed": reversed,
    "round": round, "set": set, "sorted": sorted, "str": str, "sum": sum, "tuple": tuple, "isinstance": isinstance,
    "math.isclose": math.isclose, "math.fabs": math.fabs, "math.sqrt": math.sqrt, "math.floor": math.floor,
    "math.ceil": math.ceil, "math.isnan": math.isnan, "math.isinf": math.isinf,
}  # fmt: skip
_SAFE_NAMES: dict[str, object] = {
    "int": int, "float": float, "str": str, "bool": bool, "list": list, "tuple": tuple, "dict": dict, "set": set,
    "frozenset": frozenset, "type(None)": type(None), "math.pi": math.pi, "math.e": math.e, "math.inf": math.inf,
}  # fmt: skip
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
}  # fmt: skip
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}  # fmt: skip
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
PLACEHOLDER = "__evr1_probe_"


class CheckError(Exception):
    """A check could not be evaluated on the returned values (the test fails)."""


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


class _Planner:
    """Replaces the maximal program-dependent sub-expressions of an assert by placeholders (collected as probes)."""

    def __init__(self) -> None:
        self.probes: list[str] = []
        self.pairs: set[int] = set()

    def probe(self, node: ast.expr) -> ast.expr:
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            node = _pairs_comprehension(node)
            self.pairs.add(len(self.probes))
        self.probes.append(ast.unparse(node))
        return ast.Name(f"{PLACEHOLDER}{len(self.probes) - 1}", ast.Load())

    def convert(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant):
            return node
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return type(node)(elts=[self.convert(e) for e in node.elts], ctx=ast.Load())  # type: ignore[call-arg]
        if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
            return ast.Dict(keys=[self.convert(k) for k in node.keys if k is not None],
                            values=[self.convert(v) for v in node.values])  # fmt: skip
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return ast.UnaryOp(node.op, self.convert(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return ast.BinOp(self.convert(node.left), node.op, self.convert(node.right))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [self.convert(v) for v in node.values])
        if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            return ast.Compare(self.convert(node.left), node.ops, [self.convert(c) for c in node.comparators])
        if isinstance(node, ast.IfExp):
            return ast.IfExp(self.convert(node.test), self.convert(node.body), self.convert(node.orelse))
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            return ast.Subscript(self.convert(node.value), self.convert(node.slice), ast.Load())
        if (
            isinstance(node, ast.Call)
            and _dotted(node.func) in _SAFE_CALLS
            and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            return ast.Call(node.func, [self.convert(a) for a in node.args],
                            [ast.keyword(k.arg, self.convert(k.value)) for k in node.keywords if k.arg])  # fmt: skip
        if (isinstance(node, (ast.Name, ast.Attribute)) and _dotted(node) in _SAFE_NAMES) or (
            isinstance(node, ast.Call) and ast.unparse(node) == "type(None)"
        ):
            return node
        return self.probe(node)


def _pairs_comprehension(node: ast.GeneratorExp | ast.ListComp) -> ast.expr:
    """`(f(x) == y for …)` -> `[("==", f(x), y) for …]`: values come back, the comparison happens in the parent."""
    elt = node.elt
    if isinstance(elt, ast.Compare) and len(elt.ops) == 1 and type(elt.ops[0]) in _CMPOPS:
        tag = ast.Constant(type(elt.ops[0]).__name__)
        elt = ast.Tuple([tag, elt.left, elt.comparators[0]], ast.Load())
    else:
        elt = ast.Tuple([ast.Constant("truth"), elt], ast.Load())
    return ast.ListComp(elt, node.generators)


@dataclass(frozen=True)
class Check:
    """One assert as the parent evaluates it: `expr` over placeholders `__evr1_probe_<i>` (the probe values)."""

    expr: ast.expr
    source: str
    pairs: frozenset[int] = frozenset()
    """Placeholders that hold (op, left, right) records (comprehensions, nested asserts), compared here."""

    def passed(self, values: Sequence[object]) -> bool:
        try:
            vals = [_Pairs(v) if i in self.pairs and isinstance(v, list) else v for i, v in enumerate(values)]
            if any(i in self.pairs and not isinstance(v, _Pairs) for i, v in enumerate(vals)):
                return False
            return _truthy(_eval(self.expr, vals))
        except (CheckError, ArithmeticError, TypeError, ValueError, IndexError, KeyError, RecursionError):
            return False


def _truthy(v: object) -> bool:
    if isinstance(v, _Pairs):
        return v.all()
    return bool(v)


class _Pairs(list):  # type: ignore[type-arg]
    """A comprehension's (op, left, right) records; `all()`/`any()` over them compares each pair here."""

    def results(self) -> list[bool]:
        out = []
        for rec in self:
            if not isinstance(rec, tuple) or not rec:
                raise CheckError("malformed comprehension record")
            if rec[0] == "truth" and len(rec) == 2:
                out.append(bool(rec[1]))
                continue
            op = _CMPOPS.get(getattr(ast, str(rec[0]), type(None)))
            if op is None or len(rec) != 3:
                raise CheckError("malformed comprehension record")
            out.append(bool(op(rec[1], rec[2])))
        return out

    def all(self) -> bool:
        return all(self.results())


def _call(name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    fn = _SAFE_CALLS[name]
    if args and isinstance(args[0], _Pairs) and name in ("all", "any", "sum", "list"):
        res = args[0].results()
        return all(res) if name == "all" else any(res) if name == "any" else sum(res) if name == "sum" else res
    if name == "isinstance" and len(args) == 2 and not isinstance(args[1], (type, tuple)):
        raise CheckError("isinstance needs a type")
    return fn(*args, **kwargs)


def _guard_binop(op: ast.operator, a: Any, b: Any) -> None:
    if isinstance(op, ast.Pow) and isinstance(b, int) and isinstance(a, int) and abs(b) > 10_000 and abs(a) > 1:
        raise CheckError("power too large")
    if isinstance(op, ast.LShift) and isinstance(b, int) and b > 100_000:
        raise CheckError("shift too large")
    if isinstance(op, ast.Mult):
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_SEQ:
                raise CheckError("repetition too large")


def _eval(node: ast.expr, values: Sequence[object]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id.startswith(PLACEHOLDER):
        return values[int(node.id[len(PLACEHOLDER) :])]
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _dotted(node)
        if name in _SAFE_NAMES:
            return _SAFE_NAMES[name]
        raise CheckError(f"unknown name {name}")
    if isinstance(node, ast.List):
        return [_eval(e, values) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, values) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_eval(e, values) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {_eval(k, values): _eval(v, values) for k, v in zip(node.keys, node.values, strict=True) if k}
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values))
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, values), _eval(node.right, values)
        _guard_binop(node.op, a, b)
        return _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.BoolOp):
        result: Any = isinstance(node.op, ast.And)
        for v in node.values:
            result = _eval(v, values)
            if isinstance(node.op, ast.And) and not _truthy(result):
                return result
            if isinstance(node.op, ast.Or) and _truthy(result):
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, values)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truthy(_eval(node.test, values)) else node.orelse, values)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, values)[_eval(node.slice, values)]
    if isinstance(node, ast.Call):
        name = _dotted(node.func)
        if name == "type" and ast.unparse(node) == "type(None)":
            return type(None)
        if name not in _SAFE_CALLS:
            raise CheckError(f"call of {name}")
        args = [_eval(a, values) for a in node.args]
        kwargs = {k.arg: _eval(k.value, values) for k in node.keywords if k.arg}
        return _call(name, args, kwargs)
    raise CheckError(f"unsupported expression {type(node).__name__}")


# -- test sources -> steps + checks ----------------------------------------------------------------------------------


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(self.new, node.ctx), node) if node.id == self.old else node


def _inline_check(body: list[ast.stmt]) -> list[ast.stmt]:
    """HumanEval's `def check(candidate): <asserts>` + `check(fn)`: the asserts inlined with `candidate` -> `fn`."""
    defs = {s.name: s for s in body if isinstance(s, ast.FunctionDef) and len(s.args.args) == 1}
    out: list[ast.stmt] = []
    for s in body:
        call = s.value if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) else None
        if call is not None and isinstance(call.func, ast.Name) and call.func.id in defs and len(call.args) == 1:
            fn = call.args[0]
            fdef = defs[call.func.id]
            if isinstance(fn, ast.Name):
                renamer = _Rename(fdef.args.args[0].arg, fn.id)
                out += [renamer.visit(stmt) for stmt in fdef.body]
                continue
        if isinstance(s, ast.FunctionDef) and s.name in defs and _has_assert(s):
            continue  # inlined at its call
        out.append(s)
    return out


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


class _RecordAsserts(ast.NodeTransformer):
    """Nested asserts -> `__evr1_rec.append((op, left, right))` records compared in the parent."""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and type(t.ops[0]) in _CMPOPS:
            rec: list[ast.expr] = [ast.Constant(type(t.ops[0]).__name__), t.left, t.comparators[0]]
        else:
            rec = [ast.Constant("truth"), t]
        call = ast.Call(
            ast.Attribute(ast.Name("__evr1_rec", ast.Load()), "append", ast.Load()), [ast.Tuple(rec, ast.Load())], []
        )
        return ast.copy_location(ast.Expr(call), node)


_RECORDS_CHECK = ast.Call(ast.Name("all", ast.Load()), [ast.Name(f"{PLACEHOLDER}0", ast.Load())], [])


def plan(source: str) -> tuple[list[Step], list[Check]]:
    """(steps for the sandbox, checks for the parent) of one assert-style test; GroundTruthError if not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise GroundTruthError(f"code test is not valid Python ({e.msg}): {source[:120]!r}") from None
    steps: list[Step] = []
    checks: list[Check] = []
    pending: list[ast.stmt] = []

    def flush() -> None:
        if pending:
            steps.append(("exec", ast.unparse(ast.Module(list(pending), []))))
            pending.clear()

    for stmt in _inline_check(tree.body):
        if isinstance(stmt, ast.Assert):
            flush()
            planner = _Planner()
            expr = planner.convert(stmt.test)
            steps.append(("probe", planner.probes))
            checks.append(Check(ast.fix_missing_locations(expr), ast.unparse(stmt), frozenset(planner.pairs)))
        elif _has_assert(stmt):
            flush()
            recorded = _RecordAsserts().visit(stmt)
            steps.append(("exec", "__evr1_rec = []\n" + ast.unparse(ast.fix_missing_locations(recorded))))
            steps.append(("probe", ["__evr1_rec"]))
            checks.append(Check(_RECORDS_CHECK, ast.unparse(stmt)[:200], frozenset({0})))
        else:
            pending.append(stmt)
    if not checks:
        raise GroundTruthError(f"code test has no assert: {source[:120]!r}")
    return steps, checks


def check_all(checks: Sequence[Check], probe_values: Sequence[Sequence[object]]) -> bool:
    """Every check passes on its probe step's values (one list of values per probe step, in order)."""
    if len(probe_values) != len(checks):
        return False
    return all(c.passed(v) for c, v in zip(checks, probe_values, strict=True))


def values_equal(got: object, want: object) -> bool:
    """Call-based tests (APPS `fn_name`): a returned tuple compares as a list; a one-element expected list also
    accepts its element (APPS wraps single return values)."""
    if isinstance(got, tuple):
        got = list(got)
    comparable = type(got) is type(want) or (isinstance(got, (int, float)) and isinstance(want, (int, float)))
    if comparable and _same(got, want):
        return True
    return isinstance(want, list) and len(want) == 1 and _same(got, want[0])


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError, RecursionError):
        return False
