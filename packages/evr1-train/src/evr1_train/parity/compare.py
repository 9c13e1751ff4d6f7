"""Compare two sides' records sample by sample: tokens, vision grids, temporal metadata, pixels, log-probs.

Token ids must match exactly, except that a vision placeholder may carry a different id on each side (vLLM's
InternVL fills `<video>` positions where transformers fills `<IMG_CONTEXT>`): what must agree is *which* positions
receive vision features, since their embeddings are replaced by those features.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evr1_train.parity.records import SideRecord

#: Pixels are the same uint8 frames through the same normalisation: anything above float32 rounding is a bug.
PIXEL_TOLERANCE = 1e-5
#: bfloat16 keeps 8 significant bits: rounding moves a value by at most 2**-8 of it (half an ulp is 2**-9 of its binade).
BF16_RELATIVE = 2.0**-8
#: Log-prob tolerance (nats, per token) when both sides run the forward in float32; see docs/families.md.
LOGPROB_TOLERANCE_FP32 = 1e-3
#: ... and when one side computes in bfloat16 (vLLM's CPU Gated DeltaNet kernel for Qwen3.5 requires it).
LOGPROB_TOLERANCE_BF16 = 0.15


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""
    value: float | None = None


@dataclass(frozen=True)
class SampleComparison:
    sample: str
    sides: tuple[str, str]
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


def _tokens(a: SideRecord, b: SideRecord) -> Check:
    pa, pb = set(a.placeholder_ids), set(b.placeholder_ids)
    lengths = "" if len(a.prompt_ids) == len(b.prompt_ids) else f"{len(a.prompt_ids)} vs {len(b.prompt_ids)} tokens, "
    for i, (x, y) in enumerate(zip(a.prompt_ids, b.prompt_ids, strict=False)):
        in_a, in_b = x in pa, y in pb
        if in_a != in_b or (not in_a and x != y):
            lo = max(0, i - 3)
            return Check(
                "tokens",
                False,
                f"{lengths}first difference at {i}: {a.side} {list(a.prompt_ids[lo : i + 4])} vs {b.side} "
                f"{list(b.prompt_ids[lo : i + 4])}",
            )
    if lengths:
        return Check("tokens", False, f"{lengths}one is a prefix of the other")
    n = sum(1 for x in a.prompt_ids if x in pa)
    same_ids = "" if pa == pb else f" (placeholder ids {sorted(pa)} vs {sorted(pb)})"
    return Check("tokens", True, f"{len(a.prompt_ids)} tokens, {n} vision{same_ids}")


def _grids(a: SideRecord, b: SideRecord) -> Check:
    keys = sorted(set(a.grids) | set(b.grids))
    for k in keys:
        if a.grids.get(k) != b.grids.get(k):
            return Check("grids", False, f"{k}: {a.grids.get(k)} vs {b.grids.get(k)}")
    return Check("grids", True, ", ".join(f"{k}={a.grids[k]}" for k in keys) or "-")


def _timing(a: SideRecord, b: SideRecord) -> Check:
    keys = sorted(set(a.timing) | set(b.timing))
    for k in keys:
        x, y = a.timing.get(k), b.timing.get(k)
        if (
            x is None
            or y is None
            or len(x) != len(y)
            or any(not math.isclose(p, q, rel_tol=1e-9, abs_tol=1e-12) for p, q in zip(x, y, strict=False))
        ):
            return Check("timing", False, f"{k}: {x} vs {y}")
    return Check("timing", True, ", ".join(f"{k}={[round(v, 4) for v in a.timing[k]][:6]}" for k in keys) or "-")


def _pixels(a: SideRecord, b: SideRecord) -> Check:
    """Equal to float32 rounding; a side that holds them in bfloat16 (vLLM casts processed pixels to the model's
    dtype) may differ by bfloat16's rounding: half an ulp, 2**-9 of the value's binade, relative."""
    import numpy as np

    keys = sorted(set(a.pixels) | set(b.pixels))
    low = _half_precision(a, b)
    worst = excess = 0.0
    for k in keys:
        if k not in a.pixels or k not in b.pixels:
            return Check("pixels", False, f"{k} only on {a.side if k in a.pixels else b.side}")
        x, y = np.asarray(a.pixels[k], np.float32), np.asarray(b.pixels[k], np.float32)
        if x.shape != y.shape:
            return Check("pixels", False, f"{k}: shape {x.shape} vs {y.shape}")
        if not x.size:
            continue
        diff = np.abs(x - y)
        allowed = PIXEL_TOLERANCE + (BF16_RELATIVE * np.maximum(np.abs(x), np.abs(y)) if low else 0.0)
        worst = max(worst, float(diff.max()))
        excess = max(excess, float((diff - allowed).max()))
    ok = excess <= 0.0
    rule = " (bfloat16 rounding allowed)" if low else ""
    return Check("pixels", ok, f"max |diff| {worst:.2e}{rule}" + ("" if ok else " beyond the tolerance"), worst)


def _half_precision(a: SideRecord, b: SideRecord) -> bool:
    return bool({a.info.get("dtype", "float32"), b.info.get("dtype", "float32")} & {"bfloat16", "float16"})


def _logprobs(a: SideRecord, b: SideRecord) -> Check | None:
    if not a.logprobs or not b.logprobs:
        return None
    if a.response_ids != b.response_ids:
        return Check("logprobs", False, f"response tokens differ: {list(a.response_ids)} vs {list(b.response_ids)}")
    bad = [r.side for r in (a, b) if not all(math.isfinite(v) for v in r.logprobs)]
    if bad:  # an engine's NaN / inf log-probs fail outright (a NaN would otherwise slip through max())
        return Check("logprobs", False, f"non-finite log-probs from {' and '.join(bad)}", math.inf)
    worst = max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True))
    tol = LOGPROB_TOLERANCE_BF16 if _half_precision(a, b) else LOGPROB_TOLERANCE_FP32
    ok = worst <= tol
    return Check("logprobs", ok, f"max |diff| {worst:.2e} nats over {len(a.logprobs)} tokens (tol {tol})", worst)


def compare_records(a: SideRecord, b: SideRecord) -> SampleComparison:
    """Every check for one sample seen by two sides."""
    if a.family != b.family:
        checks: tuple[Check, ...] = (Check("family", False, f"{a.family} vs {b.family}"),)
        return SampleComparison(a.sample, (a.side, b.side), checks)
    found = [_tokens(a, b), _grids(a, b), _timing(a, b), _pixels(a, b)]
    lp = _logprobs(a, b)
    if lp is not None:
        found.append(lp)
    return SampleComparison(a.sample, (a.side, b.side), tuple(found))


def compare_sides(sides: Mapping[str, Sequence[SideRecord]]) -> list[SampleComparison]:
    """All pairs of sides, sample by sample (a sample missing on one side is a failure, not a silent skip)."""
    out: list[SampleComparison] = []
    for first, second in itertools.combinations(sides, 2):
        by_a = {r.sample: r for r in sides[first]}
        by_b = {r.sample: r for r in sides[second]}
        for sample in sorted(set(by_a) | set(by_b)):
            if sample not in by_a or sample not in by_b:
                missing = first if sample not in by_a else second
                check = Check("present", False, f"no record on {missing} (it failed there, see its log)")
                out.append(SampleComparison(sample, (first, second), (check,)))
                continue
            out.append(compare_records(by_a[sample], by_b[sample]))
    return out


def table(results: Sequence[SampleComparison]) -> str:
    """A per-sample table: one row per (sample, pair of sides)."""
    cols = ("tokens", "grids", "timing", "pixels", "logprobs")
    head = f"{'sample':<14}{'sides':<12}" + "".join(f"{c:<9}" for c in cols) + "details"
    lines = [head, "-" * len(head)]
    for r in results:
        marks = ["-" if (check := r.check(c)) is None else ("ok" if check.ok else "FAIL") for c in cols]
        bad = [f"{c.name}: {c.detail}" for c in r.checks if not c.ok]
        lp = r.check("logprobs")
        detail = "; ".join(bad) if bad else (lp.detail if lp else (r.check("tokens") or Check("", True)).detail)
        lines.append(f"{r.sample[:13]:<14}{'/'.join(r.sides):<12}" + "".join(f"{m:<9}" for m in marks) + detail)
    failed = sum(not r.ok for r in results)
    lines.append(f"{len(results)} comparisons, {failed} with a mismatch")
    return "\n".join(lines)


def max_logprob_diff(results: Sequence[SampleComparison]) -> float | None:
    values = [c.value for r in results for c in r.checks if c.name == "logprobs" and c.value is not None]
    return max(values) if values else None
