"""Route a response to the scorer of its problem type and combine accuracy and format into one reward."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any, Literal

from evr1_rewards import end_of_turn as _eot
from evr1_rewards.end_of_turn import end_of_turn_tokens as eot_tokens
from evr1_rewards.errors import GroundTruthError, RewardConfigError, RewardError, one_of
from evr1_rewards.extract import Response, structure_ok
from evr1_rewards.judge import Judge, ask_judge
from evr1_rewards.registry import get_scorer, normalize_problem_type
from evr1_rewards.sandbox.config import SandboxConfig
from evr1_rewards.sandbox.types import SandboxUnavailableError
from evr1_rewards.truth import clean_extras, references
from evr1_rewards.types import (
    MODES,
    Context,
    Mode,
    Outcome,
    RewardInput,
    RewardResult,
    RewardWeights,
    Scorer,
    make_result,
)
from evr1_rewards.vocabulary import CODE

log = logging.getLogger(__name__)

ThinkPolicy = Literal["optional", "required", "forbidden"]
THINK_POLICIES: tuple[ThinkPolicy, ...] = ("optional", "required", "forbidden")

TRUTH_CACHE_SIZE = 4096
_EMPTY: Mapping[str, object] = {}


class _TooBig(Exception):
    pass


def _frozen(v: object, budget: list[int] | None = None) -> object:
    """A hashable stand-in for small lists/dicts (an MC row's options, a code row's tests) so their parsed ground
    truth is cached too; large values are not worth freezing (_TooBig: parse every time)."""
    t = type(v)
    if t is str or t is int or t is float or t is bool or v is None:
        return v
    if budget is None:
        budget = [256]
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooBig
    if (t is list or t is tuple) and isinstance(v, (list, tuple)):  # (exact types: subclasses stay as they are)
        return (t.__name__, *(_frozen(x, budget) for x in v))
    if isinstance(v, Mapping):
        return ("dict", *((k, _frozen(x, budget)) for k, x in v.items()))
    return v


_MISS = object()

_PARALLEL_TYPES = frozenset({"code", "math"})
"""Types whose scorers wait on subprocesses: score_batch runs them on a thread pool."""


def _clip(x: float) -> float:
    """Clamp to [0, 1]; NaN (or a non-number from a custom scorer) becomes 0."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return 0.0
    return min(x, 1.0) if x >= 0.0 else 0.0  # (NaN is not >= 0)


def _name(inp: RewardInput, index: int | None = None) -> str:
    if inp.sample_id is not None:
        return f"sample {inp.sample_id!r}"
    return f"sample #{index}" if index is not None else "sample"


class RewardRouter:
    """Score responses of any registered problem type.

    >>> RewardRouter().score(RewardInput(response="<answer>B</answer>", ground_truth="B", problem_type="mcq")).overall
    1.0

    Args:
        weights: `{"accuracy": w, "format": 1 - w}` (validated: in [0, 1], summing to 1).
        mode: "reward" (strict, for training) or "metric" (benchmark conventions, e.g. swap reversed spans).
        think: whether the format score requires, allows or forbids a `<think>…</think>` block before the answer.
        on_unknown: "raise" (default) or "open_ended" - the explicit opt-in to score unknown types as open-ended text.
        on_error: "raise" (default) or "zero" - score a sample whose ground truth is broken as 0 and log it.
        workers: threads used by score_batch for code/math (subprocess-bound) samples.
        judge: optional LLM judge (`evr1_rewards.judge.Judge`: the judge prompt -> its text, the interface evr1-eval's
            judged benchmarks use) asked by `ascore`/`ascore_batch` for `judge_types`; `score` never calls it.
        end_of_turn_tokens: chat-template tokens to strip from the end of responses, beyond the built-in and
            registered ones (`evr1_rewards.end_of_turn`).
        sandbox: how `code` answers run: a `SandboxConfig`, a mapping of its fields, a backend name, or a
            SandboxFusion URL; None reads the environment (`evr1_rewards.sandbox.config`). A missing boundary
            raises SandboxUnavailableError even with on_error="zero" (it is not a per-sample problem).
    """

    def __init__(
        self,
        weights: RewardWeights | Mapping[str, float] | None = None,
        *,
        mode: Mode = "reward",
        think: ThinkPolicy = "optional",
        on_unknown: Literal["raise", "open_ended"] = "raise",
        on_error: Literal["raise", "zero"] = "raise",
        workers: int = 4,
        judge: Judge | None = None,
        judge_types: Sequence[str] = ("open_ended",),
        sandbox: SandboxConfig | Mapping[str, object] | str | None = None,
        end_of_turn_tokens: Sequence[str] = (),
    ) -> None:
        self.weights = RewardWeights.coerce(weights)
        if workers < 1:
            raise RewardConfigError(f"workers must be >= 1, got {workers}")
        self.mode: Mode = one_of("mode", mode, MODES)
        self.think: ThinkPolicy = one_of("think", think, THINK_POLICIES)
        self.on_unknown = one_of("on_unknown", on_unknown, ("raise", "open_ended"))
        self.on_error = one_of("on_error", on_error, ("raise", "zero"))
        self.workers = workers
        self._cache: dict[object, Any] = {}
        self.judge = judge
        self.judge_types = frozenset(normalize_problem_type(t) for t in judge_types)
        self._scorers: dict[str, Scorer[Any]] = {}
        self.sandbox = SandboxConfig.coerce(sandbox)
        self.extra_end_of_turn = tuple(end_of_turn_tokens)
        self._plain_ctx: dict[str, Context] = {m: Context({}, m, self.sandbox) for m in MODES}
        self._by_name: dict[str, tuple[str, Scorer[Any]]] = {}
        self._eot_version = -1
        self._eot: tuple[str, ...] = ()

    def _resolve(self, problem_type: str) -> str:
        try:
            return normalize_problem_type(problem_type)
        except RewardError:
            if self.on_unknown == "open_ended":
                return "open_ended"
            raise

    def score(self, inp: RewardInput, *, mode: Mode | None = None, _index: int | None = None) -> RewardResult:
        """Score one input. Raises only on bad configuration or ground truth (see `on_error`), never on the response."""
        mode = self.mode if mode is None else one_of("mode", mode, MODES)
        try:
            hit = self._by_name.get(inp.problem_type) if type(inp.problem_type) is str else None
            if hit is None:
                key = self._resolve(inp.problem_type)
                scorer = self._scorers.get(key) or get_scorer(key)
                self._scorers[key] = scorer
                if type(inp.problem_type) is str and key != "open_ended" and len(self._by_name) < 4096:
                    self._by_name[inp.problem_type] = (key, scorer)
            else:
                key, scorer = hit
            ex = inp.extras
            extras = (clean_extras(ex) if ex else _EMPTY) if type(ex) is dict or isinstance(ex, Mapping) else _EMPTY
            try:
                truth = self._truth(key, scorer, inp.ground_truth, extras)
            except GroundTruthError as e:
                raise GroundTruthError(f"{_name(inp, _index)} ({key}): {e}") from None
            if self._eot_version != _eot.VERSION:
                self._eot = eot_tokens(self.extra_end_of_turn)
                self._eot_version = _eot.VERSION
            resp = Response(inp.response, self._eot, fold=key != CODE)
            ctx = self._plain_ctx[mode] if not extras else Context(extras, mode, self.sandbox)
            outcome = scorer.score(resp, truth, ctx)
        except SandboxUnavailableError:
            raise
        except RewardError as e:
            if self.on_error == "zero":
                log.warning("reward: scoring %s failed, scored 0: %s", _name(inp, _index), e)
                return RewardResult(
                    overall=0.0, accuracy=0.0, format=0.0, problem_type=str(inp.problem_type), details={"error": str(e)}
                )
            raise
        return self._combine(key, resp, outcome)

    def clear_cache(self) -> None:
        """Forget the parsed ground truths (a benchmark of distinct rows measures the cold path with this)."""
        self._cache.clear()

    def _truth(self, key: str, scorer: Scorer[Any], ground_truth: object, extras: Mapping[str, object]) -> Any:
        """Parsed ground truth, cached: in GRPO every prompt's ground truth is scored n times in a row."""
        try:
            cache_key = (
                key,
                ground_truth if type(ground_truth) is str else _frozen(ground_truth),
                tuple((k, _frozen(v)) for k, v in extras.items()) if extras else (),
            )
            hit = self._cache.get(cache_key, _MISS)  # (a tuple's hash is not kept: computed here, once)
        except (TypeError, _TooBig):  # unhashable or large values: parse every time
            return scorer.parse_truth(ground_truth, extras)
        if hit is _MISS:
            hit = scorer.parse_truth(ground_truth, extras)
            if len(self._cache) >= TRUTH_CACHE_SIZE:
                self._cache.clear()
            self._cache[cache_key] = hit
        return hit

    def _combine(self, key: str, resp: Response, outcome: Outcome) -> RewardResult:
        acc = outcome.accuracy
        if type(acc) is not float or not 0.0 <= acc <= 1.0:  # (a float in range, the common case, is kept as is)
            acc = _clip(acc)
        fmt = 1.0 if outcome.parsed and structure_ok(resp, self.think) else 0.0
        overall = self.weights.accuracy * acc + self.weights.format * fmt
        details = outcome.details
        if resp.truncated:
            details = {**details, "truncated": True}
        return make_result(_clip(overall), acc, fmt, key, details)

    def score_batch(self, batch: Sequence[RewardInput], *, mode: Mode | None = None) -> list[RewardResult]:
        """Score many inputs in order; code/math samples run concurrently on `workers` threads."""
        results: list[RewardResult | None] = [None] * len(batch)
        slow: list[int] = []
        for i, inp in enumerate(batch):
            key = None
            with suppress(RewardError):  # an unknown type is reported by `score`, in order
                key = self._resolve(inp.problem_type)
            if key in _PARALLEL_TYPES and self.workers > 1:
                slow.append(i)
            else:
                results[i] = self.score(inp, mode=mode, _index=i)
        if slow:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(slow))) as pool:
                futures = {i: pool.submit(self.score, batch[i], mode=mode, _index=i) for i in slow}
                for i, fut in futures.items():
                    results[i] = fut.result()
        return [r for r in results if r is not None]

    async def ascore(self, inp: RewardInput, *, mode: Mode | None = None) -> RewardResult:
        """Like `score`, but types in `judge_types` are scored by the async judge when one is configured."""
        key = self._resolve(inp.problem_type)
        if self.judge is None or key not in self.judge_types:
            return self.score(inp, mode=mode)
        extras = clean_extras(inp.extras) if isinstance(inp.extras, Mapping) else {}
        try:
            refs = references(inp.ground_truth, normalize=False)
        except GroundTruthError as e:
            raise GroundTruthError(f"{_name(inp)} ({key}): {e}") from None
        resp = Response(inp.response, eot_tokens(self.extra_end_of_turn))
        answer = resp.extraction().text
        if not answer.strip():
            return self._combine(key, resp, Outcome(0.0, False, {"judge": True}))
        verdict = await ask_judge(self.judge, str(extras.get("question") or ""), refs, answer)
        if verdict.value is None:  # no verdict is no score: never a guessed 0 or 1
            raise RewardError(
                f"{_name(inp)} ({key}): the judge gave no verdict ({verdict.error or verdict.text[-200:]!r})"
            )
        return self._combine(key, resp, Outcome(float(verdict.value), True, {"judge": True}))

    async def ascore_batch(
        self, batch: Sequence[RewardInput], *, mode: Mode | None = None, concurrency: int = 32
    ) -> list[RewardResult]:
        """`ascore` over a batch with at most `concurrency` judge calls in flight; results keep the input order."""
        gate = asyncio.Semaphore(concurrency)

        async def one(inp: RewardInput) -> RewardResult:
            async with gate:
                return await self.ascore(inp, mode=mode)

        return list(await asyncio.gather(*(one(inp) for inp in batch)))


_DEFAULT_ROUTERS: dict[tuple[float, float, str], RewardRouter] = {}


def score(
    response: object,
    ground_truth: object,
    problem_type: str,
    *,
    options: Sequence[str] | None = None,
    extras: Mapping[str, object] | None = None,
    weights: RewardWeights | Mapping[str, float] | None = None,
    mode: Mode = "reward",
) -> RewardResult:
    """Score one response: `score("<answer>B</answer>", "B", "multiple choice", options=["A. red", "B. blue"])`."""
    merged: dict[str, object] = dict(extras or {})
    if options is not None:
        merged["options"] = list(options)
    w = RewardWeights.coerce(weights)
    key = (w.accuracy, w.format, mode)
    router = _DEFAULT_ROUTERS.get(key) or _DEFAULT_ROUTERS.setdefault(key, RewardRouter(w, mode=mode))
    text = response if isinstance(response, str) else "" if response is None else str(response)
    return router.score(RewardInput(response=text, ground_truth=ground_truth, problem_type=problem_type, extras=merged))
