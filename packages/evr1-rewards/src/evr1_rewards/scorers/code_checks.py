"""Assert tests checked in the parent: the program only ever computes values, never verdicts.

`plan(test_source)` splits a test (`assert add(1, 2) == 3`, HumanEval's `def check(candidate): …; check(add)`,
set-up statements between asserts) into sandbox *steps* and parent-side *checks*:

- the parts of an assert that need the program — calls of its functions, its names, anything not in the small
  expression language below — become *probe* expressions the sandbox evaluates and returns as plain data;
- everything else — literals (the expected values), comparisons, `not`/`and`/`or`, arithmetic, indexing and a
  whitelist of pure built-ins (`len`, `sorted`, `abs`, `round`, `set`, `math.isclose`, …) — is evaluated here, in
  the parent, on the decoded values. Expected literals never enter the sandbox; a program's object with a rigged
  `__eq__` never reaches a comparison (only built-in values come back).

The test's own constants (`PAIRS = [(1, 2), ...]`, bound once to a literal) and loops / comprehensions over them
(`for x, y in PAIRS: assert f(x) == y`, `assert all(f(x) == y for x, y in PAIRS)`, HumanEval's `check` looping over
a table) are evaluated here too: unrolled (at most MAX_UNROLL items) into one probe per call, so the expected value of
each item never enters the sandbox. Only where a loop or comprehension depends on values the test computes at run
time (set-up code the sandbox must run) is it evaluated in the sandbox as recorded (left, right) pairs: there the
right-hand side is visible to the program; the comparison still happens here.
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.sandbox.types import Step
from evr1_rewards.scorers._common import every

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
_DISPLAYS: dict[type, Callable[[Iterable[Any]], Any]] = {ast.List: list, ast.Tuple: tuple, ast.Set: set}
_TRUSTED_CALLS: dict[str, Callable[..., Any]] = {"range": range, "zip": zip, "enumerate": enumerate}
"""Only in a test's own constant expressions (loop ranges): never applied to a value a program returned."""
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
    """Replaces the maximal program-dependent sub-expressions of an assert by placeholders (collected as probes).

    `env`: the test's constants (evaluated here): a name bound to one stays here on the check's side, and a probe
    that uses it gets the value written into its source, so the sandbox never holds the name (nor can rebind it)."""

    def __init__(self, env: Mapping[str, object] | None = None) -> None:
        self.probes: list[str] = []
        self.pairs: set[int] = set()
        self.env: Mapping[str, object] = env or {}

    def probe(self, node: ast.expr) -> ast.expr:
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            unrolled = _expand_comprehension(node, self.env)
            if unrolled is not None:
                return self.convert(unrolled)
            node = ast.ListComp(_record(node.elt), node.generators)  # values come back, compared in the parent
            self.pairs.add(len(self.probes))
        if self.env:
            node = _substitute(node, self.env) or node
        self.probes.append(ast.unparse(node))
        return ast.Name(f"{PLACEHOLDER}{len(self.probes) - 1}", ast.Load())

    def convert(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant):
            return node
        if isinstance(node, ast.Name) and node.id in self.env:
            lit = _literal(self.env[node.id])
            if lit is not None:
                return lit
        if isinstance(node, ast.Set):
            return ast.Set(elts=[self.convert(e) for e in node.elts])
        if isinstance(node, (ast.List, ast.Tuple)):
            return type(node)(elts=[self.convert(e) for e in node.elts], ctx=ast.Load())
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


def _record(test: ast.expr) -> ast.Tuple:
    """`f(x) == y` -> `("Eq", f(x), y)`, any other test -> `("truth", test)`: the record a comprehension or a nested
    assert returns, so the values come back and the comparison happens in the parent (`_Pairs`)."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _CMPOPS:
        return ast.Tuple([ast.Constant(type(test.ops[0]).__name__), test.left, test.comparators[0]], ast.Load())
    return ast.Tuple([ast.Constant("truth"), test], ast.Load())


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


class _Pairs(list):
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


def _eval(node: ast.expr, values: Sequence[object], env: Mapping[str, object] | None = None) -> Any:
    """Evaluate a check (`values`: the probe values) or, with `env`, a test's own constant expression (`env`: the
    test's constants; `range`, `zip` and `enumerate` are allowed there, never on values a program returned)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id.startswith(PLACEHOLDER):
        return values[int(node.id[len(PLACEHOLDER) :])]
    if env is not None and isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _dotted(node)
        if name in _SAFE_NAMES:
            return _SAFE_NAMES[name]
        raise CheckError(f"unknown name {name}")
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return _DISPLAYS[type(node)](_eval(e, values, env) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {_eval(k, values, env): _eval(v, values, env) for k, v in zip(node.keys, node.values, strict=True) if k}
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values, env))
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, values, env), _eval(node.right, values, env)
        _guard_binop(node.op, a, b)
        return _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.BoolOp):
        return _eval_boolop(node, values, env)
    if isinstance(node, ast.Compare):
        return _eval_compare(node, values, env)
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truthy(_eval(node.test, values, env)) else node.orelse, values, env)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, values, env)[_eval(node.slice, values, env)]
    if isinstance(node, ast.Call):
        return _eval_call(node, values, env)
    raise CheckError(f"unsupported expression {type(node).__name__}")


def _eval_boolop(node: ast.BoolOp, values: Sequence[object], env: Mapping[str, object] | None) -> Any:
    """`and` / `or` with Python's short-circuit and operand result."""
    result: Any = isinstance(node.op, ast.And)
    for v in node.values:
        result = _eval(v, values, env)
        if isinstance(node.op, ast.And) and not _truthy(result):
            return result
        if isinstance(node.op, ast.Or) and _truthy(result):
            return result
    return result


def _eval_compare(node: ast.Compare, values: Sequence[object], env: Mapping[str, object] | None) -> bool:
    """A chained comparison (`a < b <= c`), each operand evaluated once."""
    left = _eval(node.left, values, env)
    for op, comp in zip(node.ops, node.comparators, strict=True):
        right = _eval(comp, values, env)
        if not _CMPOPS[type(op)](left, right):
            return False
        left = right
    return True


def _eval_call(node: ast.Call, values: Sequence[object], env: Mapping[str, object] | None) -> Any:
    """A call of an allowed function (`_SAFE_CALLS`; in a test's own constants also `_TRUSTED_CALLS`)."""
    name = _dotted(node.func)
    if name == "type" and ast.unparse(node) == "type(None)":
        return type(None)
    if name is None:
        raise CheckError(f"call of {ast.unparse(node.func)[:80]}")
    trusted = env is not None and name in _TRUSTED_CALLS
    if name not in _SAFE_CALLS and not trusted:
        raise CheckError(f"call of {name}")
    args = [_eval(a, values, env) for a in node.args]
    kwargs = {k.arg: _eval(k.value, values, env) for k in node.keywords if k.arg}
    if trusted:
        return _TRUSTED_CALLS[name](*args, **kwargs)
    return _call(name, args, kwargs)


# -- test sources -> steps + checks ----------------------------------------------------------------------------------


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
                param = fdef.args.args[0].arg
                for name in (n for st in fdef.body for n in ast.walk(st) if isinstance(n, ast.Name) and n.id == param):
                    name.id = fn.id
                out += fdef.body
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
        append = ast.Attribute(ast.Name("__evr1_rec", ast.Load()), "append", ast.Load())
        return ast.copy_location(ast.Expr(ast.Call(append, [_record(node.test)], [])), node)


_RECORDS_CHECK = ast.Call(ast.Name("all", ast.Load()), [ast.Name(f"{PLACEHOLDER}0", ast.Load())], [])

MAX_UNROLL = 2000
"""Iterations of a test's loop or comprehension unrolled here (beyond: the sandbox-side records fallback)."""
MAX_LITERAL_CHARS = 1 << 16
"""The longest constant written into probe sources."""


def _literal(v: object, depth: int = 0) -> ast.expr | None:
    """An expression that evaluates to `v` (built-in values only: exact types, never a subclass), or None."""
    t = type(v)
    if v is None or (isinstance(v, (bool, str, bytes)) and t in (bool, str, bytes)):
        return ast.Constant(v)
    if isinstance(v, int) and t is int:
        if abs(v) >= 10**4000:
            return None
        return ast.parse(repr(v), mode="eval").body if v < 0 else ast.Constant(v)
    if isinstance(v, float) and t is float:
        if math.isfinite(v):
            return ast.parse(repr(v), mode="eval").body
        return ast.Call(ast.Name("float", ast.Load()), [ast.Constant(repr(v))], [])
    if depth > 32:
        return None
    if isinstance(v, (list, tuple, set)) and t in (list, tuple, set):
        elts = every([_literal(x, depth + 1) for x in v])
        if elts is None:
            return None
        if t is set:
            return ast.Set(elts=elts) if elts else ast.Call(ast.Name("set", ast.Load()), [], [])
        return (ast.List if t is list else ast.Tuple)(elts=elts, ctx=ast.Load())
    if isinstance(v, dict) and t is dict:
        keys, vals = every([_literal(k, depth + 1) for k in v]), every([_literal(x, depth + 1) for x in v.values()])
        if keys is None or vals is None:
            return None
        return ast.Dict(keys=[*keys], values=vals)
    return None


def _const(node: ast.expr, env: Mapping[str, object]) -> tuple[bool, object]:
    """(True, value) when `node` is the test's own constant (literals, `env` names, safe built-ins), else (False, None)."""
    try:
        return True, _eval(node, (), env)
    except (CheckError, ArithmeticError, TypeError, ValueError, IndexError, KeyError, RecursionError, AttributeError):
        return False, None


def _binds(node: ast.AST) -> set[str]:
    """Names a node binds inside itself (comprehension targets, lambda arguments, walrus targets)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            out |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= {a.arg for a in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs)}
        elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out


class _Substitute(ast.NodeTransformer):
    def __init__(self, env: Mapping[str, object]) -> None:
        self.env = env
        self.failed = False

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.env:
            lit = _literal(self.env[node.id])
            if lit is None:
                self.failed = True
                return node
            return ast.copy_location(lit, node)
        return node


def _substitute(node: ast.AST, env: Mapping[str, object]) -> Any:
    """A copy of `node` with the `env` names it reads written as literals; None when one cannot be."""
    if not env:
        return node
    if _binds(node) & set(env):
        return None
    sub = _Substitute(env)
    out = sub.visit(copy.deepcopy(node))
    return None if sub.failed else ast.fix_missing_locations(out)


def _bind_target(target: ast.expr, value: object, env: dict[str, object]) -> bool:
    """Bind a loop target (a name or a tuple of targets) to `value` in `env`; False when it does not unpack."""
    if isinstance(target, ast.Name):
        env[target.id] = value
        return True
    if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
        if not isinstance(value, Iterable):
            return False
        try:
            items = list(value)
        except TypeError:
            return False
        if len(items) != len(target.elts):
            return False
        return all(_bind_target(t, x, env) for t, x in zip(target.elts, items, strict=True))
    return False


def _iterate(node: ast.expr, env: Mapping[str, object]) -> list[object] | None:
    """The items of a test's constant iterable (at most MAX_UNROLL), or None."""
    ok, value = _const(node, env)
    if not ok or not isinstance(value, Iterable):
        return None
    try:
        items = list(itertools.islice(value, MAX_UNROLL + 1))
    except TypeError:
        return None
    return items if len(items) <= MAX_UNROLL else None


def _unroll(stmt: ast.stmt, env: dict[str, object], out: list[ast.Assert]) -> bool:
    """Append the asserts `stmt` amounts to, with every loop variable written in (loops over the test's own
    constants, `if`s on them, constant assignments); False when it is anything else (then it runs as records)."""
    if isinstance(stmt, ast.Assert):
        done = _substitute(stmt, env)
        if done is None:
            return False
        out.append(done)
        return len(out) <= MAX_UNROLL
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        ok, value = _const(stmt.value, env)
        if ok and _literal(value) is not None:
            env[stmt.targets[0].id] = value
        return ok
    if isinstance(stmt, ast.If):
        ok, test = _const(stmt.test, env)
        return ok and all(_unroll(s, env, out) for s in (stmt.body if test else stmt.orelse))
    if isinstance(stmt, ast.For) and not stmt.orelse:
        items = _iterate(stmt.iter, env)
        if items is None:
            return False
        for item in items:
            inner = dict(env)
            if not _bind_target(stmt.target, item, inner) or not all(_unroll(s, inner, out) for s in stmt.body):
                return False
        return True
    return False


def _expand_comprehension(node: ast.GeneratorExp | ast.ListComp, env: Mapping[str, object]) -> ast.expr | None:
    """`[f(x) == y for x, y in PAIRS if …]` over the test's own constants -> a list of the elements with the values
    written in: `[f(1) == 2, f(3) == 4]` (the probes get the arguments, the comparisons stay here); else None."""
    elts: list[ast.expr] = []

    def walk(gens: list[ast.comprehension], scope: dict[str, object]) -> bool:
        if not gens:
            e = _substitute(node.elt, scope)
            if e is None:
                return False
            elts.append(e)
            return len(elts) <= MAX_UNROLL
        g = gens[0]
        if g.is_async:
            return False
        items = _iterate(g.iter, scope)
        if items is None:
            return False
        for item in items:
            inner = dict(scope)
            if not _bind_target(g.target, item, inner):
                return False
            conds = [_const(cond, inner) for cond in g.ifs]  # every `if` must be the test's own constant
            if not all(ok for ok, _ in conds) or (all(v for _, v in conds) and not walk(gens[1:], inner)):
                return False
        return True

    return ast.List(elts=elts, ctx=ast.Load()) if walk(list(node.generators), dict(env)) else None


def _stored_names(tree: ast.AST) -> dict[str, int]:
    """How many times each name is bound anywhere in the test (assignments, loops, defs, imports, …)."""
    counts: Counter[str] = Counter()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            counts[n.id] += 1
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[n.name] += 1
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            counts.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            counts.update(n.names * 2)  # rebound from a function: never a constant of the test
        elif isinstance(n, ast.ExceptHandler) and n.name:
            counts[n.name] += 1
        elif isinstance(n, ast.arg):
            counts[n.arg] += 1
    return counts


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def plan(source: str) -> tuple[list[Step], list[Check]]:
    """(steps for the sandbox, checks for the parent) of one assert-style test; GroundTruthError if not Python.

    The test's own constants (`expected = [1, 2]`, bound once to literals) and loops / comprehensions over them are
    evaluated here: their values never enter the sandbox except as the arguments the probes pass, so a program can
    neither read an expected value from its caller's frame nor rebind it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise GroundTruthError(f"code test is not valid Python ({e.msg}): {source[:120]!r}") from None
    body = _inline_check(tree.body)
    stored = _stored_names(ast.Module(body, []))
    candidates: set[str] = set()
    env: dict[str, object] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            ok, value = _const(stmt.value, env)
            lit = _literal(value) if ok and stored.get(name) == 1 else None
            if lit is not None and len(ast.unparse(lit)) <= MAX_LITERAL_CHARS:
                candidates.add(name)
                env[name] = value
    while True:
        steps, checks, sandbox_reads = _plan_with(body, {k: v for k, v in env.items() if k in candidates})
        leaked = candidates & sandbox_reads
        if not leaked:
            break
        candidates -= leaked  # read by set-up code that runs in the sandbox: it must be defined there
    if not checks:
        raise GroundTruthError(f"code test has no assert: {source[:120]!r}")
    return steps, checks


def _plan_with(body: list[ast.stmt], consts: Mapping[str, object]) -> tuple[list[Step], list[Check], set[str]]:
    steps: list[Step] = []
    checks: list[Check] = []
    pending: list[ast.stmt] = []
    reads: set[str] = set()

    def flush() -> None:
        if pending:
            module = ast.Module(list(pending), [])
            reads.update(_loads(module))
            steps.append(("exec", ast.unparse(module)))
            pending.clear()

    def add_assert(stmt: ast.Assert) -> None:
        flush()
        planner = _Planner(consts)
        expr = planner.convert(stmt.test)
        steps.append(("probe", planner.probes))
        checks.append(Check(ast.fix_missing_locations(expr), ast.unparse(stmt), frozenset(planner.pairs)))

    for stmt in body:
        if isinstance(stmt, ast.Assert):
            add_assert(stmt)
        elif _has_assert(stmt):
            unrolled: list[ast.Assert] = []
            if _unroll(stmt, dict(consts), unrolled):
                for a in unrolled:
                    add_assert(a)
                continue
            flush()
            recorded = _RecordAsserts().visit(copy.deepcopy(stmt))
            reads.update(_loads(recorded))
            steps.append(("exec", "__evr1_rec = []\n" + ast.unparse(ast.fix_missing_locations(recorded))))
            steps.append(("probe", ["__evr1_rec"]))
            checks.append(Check(_RECORDS_CHECK, ast.unparse(stmt)[:200], frozenset({0})))
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in consts
        ):
            continue  # a constant of the test: evaluated here, never sent
        else:
            pending.append(stmt)
    return steps, checks, reads  # set-up after the last assert decides nothing: it is not run


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
