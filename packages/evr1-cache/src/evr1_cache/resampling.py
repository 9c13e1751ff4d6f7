"""Pixel-exact resizing in numpy: each resize rule named in the spec (`evr1_cache.spec.ResizeRule`) reproduced bit for bit.

Why not simply call the reference: torch is too heavy a dependency for a cache that training *and* evaluation install,
and Pillow's 8-bit bicubic (same kernel) rounds between its two passes, up to 22 levels away from torchvision's
result. So the rule is re-derived here from the reference's source and pinned by differential tests
(`tests/test_resample_parity.py` against the real torch/torchvision, docs/cache.md for the derivation):

`torchvision-bicubic-aa` — qwen-vl-utils 0.0.14 `fetch_video` calls `torchvision.transforms.functional.resize(video,
antialias=True, BICUBIC)` on the decoded **uint8** tensor. torchvision 0.28 casts it to float32, runs torch's CPU
separable antialiased-bicubic kernel (`aten/src/ATen/native/cpu/UpSampleKernel.cpp`: Keys cubic a = -0.5, support
2 x scale when shrinking, weights normalised per output pixel, horizontal pass then vertical pass, float32 everywhere,
the float32 intermediate neither rounded nor clamped), clamps to [0, 255] and rounds half to even once at the end. The
float32 arithmetic is reproduced operation for operation, including what the compiler did to it: torch's AVX2 and
AVX-512 kernels (every x86-64 CPU since 2013) evaluate the cubic with fused multiply-adds and accumulate each output
pixel as four plain multiply-adds per vectorised group followed by fused ones for the remainder; torch's portable
kernel (older CPUs, `ATEN_CPU_CAPABILITY=default`) uses no fused operations (`torchvision-bicubic-aa-nofma`).

Speed: an exact sequential float32 loop in numpy is several times slower than decoding, so the values are computed
with float32 BLAS on banded weight blocks (any summation order) over the frames as they are (channels interleaved, no
transposition), then every value within the proven error bound of a rounding boundary (x.5) is recomputed with the
reference's exact operations; every other value rounds the same either way. At the benchmark settings 0.07% of values
take the exact path. Content with many exact ties (checkerboards) is recomputed chunk by chunk, up to ~10x slower.
In a cache build the resize runs in a background thread while the decoder goes on (`ResizeStream`), so its cost
hides behind decoding: builds take 1.09x a bare `ffmpeg` decode (benchmarks/cache_vs_decode.py, docs/cache.md).

`pillow-bicubic` — Pillow's `Image.resize(BICUBIC)` per frame (what qwen-vl-utils' `fetch_image` does for images).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from evr1_cache.registry import registering
from evr1_cache.spec import get_resize_rule

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    import numpy as np
    from threadpoolctl import ThreadpoolController

#: uint8 frames: one `[T, H, W, 3]` array, or a sequence of `[H, W, 3]` arrays (as decoders hand them over).
Frames = Union["np.ndarray", Sequence["np.ndarray"]]
#: An implementation: (frames, height, width, threads) -> uint8 `[T, height, width, 3]`.
Resampler = Callable[[Frames, int, int, int], "np.ndarray"]
RESAMPLERS: dict[str, Resampler] = {}

#: Output columns (rows) per BLAS block of the approximate pass: wider blocks waste multiplications on zero weights,
#: narrower ones make BLAS calls too small to be fast (measured on 720p -> 336x588 and on enlargements).
_BLOCK = 8
#: Float32 input values held at once (frames are processed in chunks of about this many values).
_CHUNK_VALUES = 1 << 21
#: Above this share of values near a rounding tie, the whole chunk is computed exactly instead of pixel by pixel.
_EXACT_SHARE = 0.02
#: Taps accumulated per vectorised group (plain multiply + add) before the fused remainder, in torch's AVX2 kernels.
_VECTOR_GROUP = 4


def register_resampler(name: str) -> Callable[[Resampler], Resampler]:
    """Add the implementation of the spec's resize rule `name` (which must be registered in `evr1_cache.spec`)."""
    get_resize_rule(name)  # an implementation without a declared rule would never reach a spec key
    return registering(RESAMPLERS, name, "a resampler for the rule")


def resample(frames: Frames, height: int, width: int, rule: str, *, threads: int = 1) -> np.ndarray:
    """Resize uint8 frames to `height` x `width` exactly as the resize rule `rule` says; `threads=0`: all cores."""
    fn = RESAMPLERS.get(rule)
    if fn is None:
        get_resize_rule(rule)  # unknown name: raises with the close matches
        raise ValueError(f"resize rule {rule!r} has no implementation in evr1_cache.resampling")
    return fn(frames, height, width, threads)


# -- torch's antialiased bicubic weights --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisWeights:
    """One axis of torch's separable antialiased bicubic: per output index the first input index, the tap count, the
    float32 weights (zero beyond the count) and how many of taps 1.. are accumulated without a fused multiply-add."""

    start: np.ndarray  # int64 [n_out]
    size: np.ndarray  # int64 [n_out]
    weights: np.ndarray  # float32 [n_out, K]
    plain_taps: np.ndarray  # int64 [n_out]
    abs_sum: float  #: the largest sum of |weight| over one output index (bounds how much rounding errors grow)


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 `a * b + c` with one rounding (a fused multiply-add), exactly, for float32 inputs.

    The product is exact in float64; the sum is rounded to float64 *to odd* (the error term of a TwoSum decides the
    parity), which makes the final rounding to float32 correct — a plain float64 sum would round twice.
    """
    import numpy as np

    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c64 = np.asarray(c, np.float64)
    s = p + c64
    back = s - p
    err = (p - (s - back)) + (c64 - back)
    odd = (s.view(np.uint64) & np.uint64(1)).astype(bool)
    toward = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
    result: np.ndarray = np.where((err == 0) | odd, s, toward).astype(np.float32)
    return result


def _cubic(x: np.ndarray, fused: bool) -> np.ndarray:
    """Keys' cubic with a = -0.5 in float32, written as torch's `cubic_convolution1/2` (fused as its AVX2 build)."""
    import numpy as np

    f = np.float32
    a = f(-0.5)
    x = np.abs(x).astype(f)
    if fused:
        near = fma32(fma32(np.full_like(x, a + f(2)), x, np.full_like(x, -(a + f(3)))) * x, x, np.full_like(x, f(1)))
        t = fma32(np.full_like(x, a), x, np.full_like(x, -(f(5) * a)))
        far = fma32(fma32(t, x, np.full_like(x, f(8) * a)), x, np.full_like(x, -(f(4) * a)))
    else:
        near = ((a + f(2)) * x - (a + f(3))) * x * x + f(1)
        far = ((a * x - f(5) * a) * x + f(8) * a) * x - f(4) * a
    out: np.ndarray = np.where(x < 1.0, near, np.where(x < 2.0, far, f(0))).astype(f)
    return out


@functools.lru_cache(maxsize=256)
def axis_weights(n_in: int, n_out: int, fused: bool) -> AxisWeights:
    """torch's `_compute_indices_min_size_weights_aa` for bicubic, float32 scalars, the C++ promotions reproduced:
    `center = scale * (i + 0.5)` and `(j + xmin - center + 0.5) * invscale` go through double, the rest is float."""
    import numpy as np

    f = np.float32
    scale = f(n_in) / f(n_out)
    support = f(2.0 * float(scale)) if scale >= 1.0 else f(2.0)
    taps = math.ceil(float(support)) * 2 + 1
    invscale = float(f(1.0 / float(scale))) if scale >= 1.0 else 1.0
    center = (float(scale) * (np.arange(n_out, dtype=np.float64) + 0.5)).astype(f)
    start = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5).astype(np.int64), 0)
    stop = np.minimum(np.trunc((center + support).astype(np.float64) + 0.5).astype(np.int64), n_in)
    size = np.clip(stop - start, 0, taps)
    j = np.arange(taps)
    offset = ((start[:, None] + j[None, :]).astype(f) - center[:, None]).astype(f)
    w = _cubic(((offset.astype(np.float64) + 0.5) * invscale).astype(f), fused)
    w = np.where(j[None, :] < size[:, None], w, f(0)).astype(f)
    total = np.zeros(n_out, f)
    for k in range(taps):  # torch sums the weights in tap order, in float32
        total = (total + w[:, k]).astype(f)
    nonzero = total != 0
    w = np.where(nonzero[:, None], (w / np.where(nonzero, total, f(1))[:, None]).astype(f), w).astype(f)
    plain = ((size - 1) // _VECTOR_GROUP) * _VECTOR_GROUP if fused else np.maximum(size - 1, 0)
    for arr in (start, size, w, plain):
        arr.setflags(write=False)
    return AxisWeights(start, size, w, plain, float(np.abs(w.astype(np.float64)).sum(axis=1).max()))


@dataclass(frozen=True)
class _Block:
    out0: int
    out1: int
    in0: int
    in1: int
    matrix: np.ndarray  # float32 [out1 - out0, in1 - in0]


@functools.lru_cache(maxsize=256)
def _blocks(n_in: int, n_out: int, fused: bool) -> tuple[_Block, ...]:
    """The weights as dense banded blocks of `_BLOCK` outputs each (for BLAS)."""
    import numpy as np

    aw = axis_weights(n_in, n_out, fused)
    out: list[_Block] = []
    for o0 in range(0, n_out, _BLOCK):
        o1 = min(n_out, o0 + _BLOCK)
        i0 = int(aw.start[o0:o1].min())
        i1 = int((aw.start[o0:o1] + aw.size[o0:o1]).max())
        m = np.zeros((o1 - o0, i1 - i0), np.float32)
        for o in range(o0, o1):
            s, n = int(aw.start[o]), int(aw.size[o])
            m[o - o0, s - i0 : s - i0 + n] = aw.weights[o, :n]
        m.setflags(write=False)
        out.append(_Block(o0, o1, i0, i1, m))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _interleaved_blocks(n_in: int, n_out: int, fused: bool, channels: int) -> tuple[_Block, ...]:
    """The horizontal blocks for channel-interleaved rows (`[.., W * C]`): each weight block repeated per channel
    (`kron(block, I_C)`, transposed for a right-hand GEMM), so no transposition of the frames is needed."""
    import numpy as np

    out: list[_Block] = []
    for b in _blocks(n_in, n_out, fused):
        m = np.zeros(((b.in1 - b.in0) * channels, (b.out1 - b.out0) * channels), np.float32)
        for c in range(channels):
            m[c::channels, c::channels] = b.matrix.T
        m.setflags(write=False)
        out.append(_Block(b.out0 * channels, b.out1 * channels, b.in0 * channels, b.in1 * channels, m))
    return tuple(out)


def _vertical(x: np.ndarray, blocks: tuple[_Block, ...], n_out: int) -> np.ndarray:
    """`x` float32 `[T, n_in, R]` -> `[T, n_out, R]`: contraction over axis 1, block by block (BLAS)."""
    import numpy as np

    out = np.empty((x.shape[0], n_out, x.shape[2]), np.float32)
    for t in range(x.shape[0]):
        for b in blocks:
            np.matmul(b.matrix, x[t, b.in0 : b.in1], out=out[t, b.out0 : b.out1])
    return out


def _horizontal(x: np.ndarray, blocks: tuple[_Block, ...], n_out: int) -> np.ndarray:
    """`x` float32 `[R, n_in]` -> `[R, n_out]` with interleaved blocks: contraction over the last axis (BLAS)."""
    import numpy as np

    out = np.empty((x.shape[0], n_out), np.float32)
    for b in blocks:
        np.matmul(x[:, b.in0 : b.in1], b.matrix, out=out[:, b.out0 : b.out1])
    return out


def _cost(blocks: tuple[_Block, ...], rows: int) -> int:
    """Multiply-adds of applying `blocks` to `rows` rows (what decides the pass order of the approximation)."""
    return rows * sum((b.in1 - b.in0) * (b.out1 - b.out0) for b in blocks)


def _gamma(n: int) -> float:
    """Higham's gamma_n for float32: bounds the relative error of an n-term dot product in any summation order."""
    u = 2.0**-24
    return n * u / (1 - n * u)


def _margin(wh: AxisWeights | None, wv: AxisWeights | None) -> float:
    """An upper bound on |approximate - torch| for any output value, whichever pass order either one used.

    Both are dot products over the same float32 weights, so each lies within E of the exact real result: inputs are
    <= 255, a first pass of K1 taps errs by at most e1 = gamma_K1 * 255 * S1 (S: the largest sum of |weights|), a
    second adds gamma_K2 * (255 * S1 + e1) * S2 and scales e1 by S2 (zero weights add no error: their products and
    sums are exact). Hence |approximate - torch| <= 2 E; the tiny absolute term covers float64 rounding of the bound.
    """
    passes = [aw for aw in (wh, wv) if aw is not None]
    worst = 0.0
    for order in (passes, passes[::-1]):
        bound, err = 255.0, 0.0
        for aw in order:
            s = aw.abs_sum
            err = err * s + _gamma(int(aw.size.max())) * (bound + err) * s
            bound *= s
        worst = max(worst, err)
    return 2.0 * worst + 1e-9


def _exact_pass(vals: np.ndarray, aw: AxisWeights, idx: np.ndarray) -> np.ndarray:
    """torch's float32 accumulation for output indices `idx` over tap values `vals` `[N, ..., K]` (last axis = taps):
    `acc = v0 * w0`, then taps 1..`plain_taps` as a rounded product added, the rest fused."""

    w = aw.weights[idx]  # [N, K]
    plain = aw.plain_taps[idx]
    shape = (len(idx),) + (1,) * (vals.ndim - 2)
    acc: np.ndarray = vals[..., 0] * w[:, 0].reshape(shape)  # float32 x float32: one rounding, as torch
    for j in range(1, int(aw.size[idx].max(initial=1))):
        acc = _add_tap(acc, vals[..., j], w[:, j].reshape(shape), j > plain)
    return acc


def _add_tap(acc: np.ndarray, t: np.ndarray, wj: np.ndarray, fused: np.ndarray) -> np.ndarray:
    """`acc + t * wj` as torch adds one tap: a rounded product added, or a fused multiply-add where `fused` (per
    output index, axis 0) says so."""
    import numpy as np

    if not fused.any():
        acc += t * wj
    elif fused.all():
        acc = fma32(t, np.broadcast_to(wj, t.shape), acc)
    else:
        plain = ~fused
        acc[plain] += t[plain] * wj[plain]
        acc[fused] = fma32(t[fused], np.broadcast_to(wj[fused], t[fused].shape), acc[fused])
    return acc


def _exact_pixels(
    frames: np.ndarray, t: np.ndarray, y: np.ndarray, x: np.ndarray, c: np.ndarray,
    wh: AxisWeights | None, wv: AxisWeights | None,
) -> np.ndarray:  # fmt: skip
    """torch's float32 value of output pixels (t, y, x, c): horizontal pass, then vertical, each as torch sums."""
    import numpy as np

    _, h_in, w_in, ch = frames.shape
    flat = frames.reshape(-1)
    base = (t * h_in * w_in * ch + c)[:, None]  # [N, 1]
    rows = y[:, None] if wv is None else np.minimum(wv.start[y][:, None] + np.arange(wv.weights.shape[1]), h_in - 1)
    if wh is not None:
        cols = np.minimum(wh.start[x][:, None] + np.arange(wh.weights.shape[1]), w_in - 1)  # [N, Kh]
        where = (base + rows * (w_in * ch))[:, :, None] + (cols * ch)[:, None, :]
        inter = _exact_pass(flat[where].astype(np.float32), wh, x)  # [N, Kv or 1]
    else:
        inter = flat[base + rows * (w_in * ch) + (x * ch)[:, None]].astype(np.float32)
    if wv is None:
        return inter[:, 0]
    return _exact_pass(inter, wv, y)


def _exact_axis(x: np.ndarray, aw: AxisWeights) -> np.ndarray:
    """torch's float32 pass over axis 0 of `x` `[n_in, R]` -> `[n_out, R]` for every output, tap by tap."""
    import numpy as np

    n_in = x.shape[0]
    w = aw.weights
    acc: np.ndarray = x[aw.start] * w[:, :1]
    for j in range(1, int(aw.size.max())):
        acc = _add_tap(acc, x[np.minimum(aw.start + j, n_in - 1)], w[:, j : j + 1], j > aw.plain_taps)
    return acc


def _exact_chunk(frames: np.ndarray, wh: AxisWeights | None, wv: AxisWeights | None) -> np.ndarray:
    """torch's float32 values of every output pixel of a chunk: `[T, h, w, C]` (the path for content where many
    values sit on rounding ties, e.g. checkerboards, for which recomputing pixel by pixel would cost more)."""
    import numpy as np

    n, h_in, w_in, ch = frames.shape
    if wh is not None:
        x = np.ascontiguousarray(frames.transpose(2, 0, 1, 3), dtype=np.float32).reshape(w_in, -1)
        x = _exact_axis(x, wh).reshape(-1, n, h_in, ch).transpose(2, 1, 0, 3)  # [H, T, w, C]
    else:
        x = frames.transpose(1, 0, 2, 3).astype(np.float32)
    x = np.ascontiguousarray(x)
    h_out = h_in
    if wv is not None:
        h_out = len(wv.start)
        x = _exact_axis(x.reshape(h_in, -1), wv)
    out: np.ndarray = x.reshape(h_out, n, -1, ch).transpose(1, 0, 2, 3)
    return out


def _torchvision_bicubic_aa(frames: np.ndarray, height: int, width: int, fused: bool) -> np.ndarray:
    """One chunk `[T, H, W, 3]` uint8 -> `[T, height, width, 3]` uint8, bit-exact (see module docstring)."""
    import numpy as np

    n, h_in, w_in, ch = frames.shape
    wh = axis_weights(w_in, width, fused) if width != w_in else None
    wv = axis_weights(h_in, height, fused) if height != h_in else None
    # frames as they are, `[T, H, W * C]` in float32: the vertical pass contracts axis 1, the horizontal one the
    # interleaved last axis with per-channel blocks; either order (the cheaper one), no transposition anywhere
    x = frames.astype(np.float32).reshape(n, h_in, w_in * ch)
    bh = _interleaved_blocks(w_in, width, fused, ch) if wh is not None else ()
    bv = _blocks(h_in, height, fused) if wv is not None else ()
    vertical_first = _cost(bv, w_in * ch) + _cost(bh, height) <= _cost(bh, h_in) + _cost(bv, width * ch)
    for step in ("v", "h") if vertical_first else ("h", "v"):
        if step == "v" and bv:
            x = _vertical(x, bv, height)
        elif step == "h" and bh:
            x = _horizontal(x.reshape(-1, w_in * ch), bh, width * ch).reshape(n, -1, width * ch)
    approx = x.reshape(n, height, width, ch)
    rounded = np.rint(approx)
    dist = np.subtract(approx, rounded, out=approx)
    near = np.flatnonzero(np.abs(dist, out=dist) > 0.5 - _margin(wh, wv))
    out: np.ndarray = np.clip(rounded, 0, 255, out=rounded).astype(np.uint8)
    if len(near) > _EXACT_SHARE * approx.size:
        np.copyto(out, np.clip(np.rint(_exact_chunk(frames, wh, wv)), 0, 255), casting="unsafe")
    elif len(near):
        t, y, xs, c = np.unravel_index(near, approx.shape)
        exact = _exact_pixels(frames, t, y, xs, c, wh, wv)
        out[t, y, xs, c] = np.clip(np.rint(exact), 0, 255).astype(np.uint8)
    return out


def _as_array(frames: Frames) -> np.ndarray:
    import numpy as np

    if isinstance(frames, np.ndarray):
        return frames
    return np.stack(frames) if len(frames) else np.empty((0, 1, 1, 3), np.uint8)


def _chunked(frames: Frames, height: int, width: int, fused: bool, threads: int) -> np.ndarray:
    """Resize in chunks of frames (bounded memory), `threads` chunks at a time, each BLAS call single-threaded.

    Why single-threaded BLAS: OpenBLAS's worker threads spin while they wait, which on a busy machine costs several
    times the work itself; parallelism over frame chunks in our own threads (numpy releases the GIL) is steadier.
    """
    import numpy as np

    if isinstance(frames, np.ndarray):
        if frames.ndim != 4:
            raise ValueError(f"expected uint8 frames [T, H, W, 3], got {frames.dtype} {frames.shape}")
        kinds = {(frames.dtype, frames.shape[1:])}
    else:  # a decoder's list: stacked chunk by chunk below, never as a second full copy of the native-size video
        kinds = {(f.dtype, f.shape) for f in frames} or {(np.dtype(np.uint8), (1, 1, 3))}
    (dtype, shape), n = next(iter(kinds)), len(frames)
    if len(kinds) > 1 or dtype != np.uint8 or len(shape) != 3 or shape[-1] != 3:
        got = ", ".join(sorted(f"{d} {s}" for d, s in kinds))
        raise ValueError(f"expected uint8 frames [T, H, W, 3] of one size, got {got}")
    h_in, w_in, _ = shape
    if (h_in, w_in) == (height, width):
        return _as_array(frames)
    out = np.empty((n, height, width, 3), np.uint8)
    workers = max(1, min(threads if threads > 0 else (os.cpu_count() or 1), n))
    step = max(1, min(_CHUNK_VALUES // (h_in * w_in * 3), -(-n // workers)))

    def one(i: int) -> None:
        chunk = frames[i : i + step] if isinstance(frames, np.ndarray) else _as_array(frames[i : i + step])
        out[i : i + step] = _torchvision_bicubic_aa(chunk, height, width, fused)

    with _single_threaded_blas():
        _in_threads(one, range(0, n, step), workers)
    return out


def _in_threads(fn: Callable[[int], None], items: range, workers: int) -> None:
    """`fn` over `items`, in `workers` threads when more than one (numpy, BLAS and Pillow release the GIL)."""
    if workers <= 1:
        for i in items:
            fn(i)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(fn, items))


@functools.lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # finds the loaded BLAS libraries once (a scan of the process's libraries)


def _single_threaded_blas() -> contextlib.AbstractContextManager[object]:
    """BLAS limited to one thread (see `_chunked` for why) from now until the result's `__exit__` (a `with` block)."""
    limiter: contextlib.AbstractContextManager[object] = _blas_controller().limit(limits=1, user_api="blas")
    return limiter


class ResizeStream:
    """Resize frames while a decoder is still producing them: `add` hands over frames one by one (a decoder's sink),
    full chunks are resized in background threads (numpy and BLAS release the GIL, the decoder works in FFmpeg's own
    threads), and `result` returns them all, `[count, height, width, 3]`. The pixels are those of `resample` with
    the same rule: chunking never changes a value. Use it as a context manager, so that the threads end on errors.
    """

    def __init__(self, count: int, height: int, width: int, rule: str, *, threads: int = 1) -> None:
        import numpy as np

        if rule not in RESAMPLERS:
            resample(np.zeros((0, 1, 1, 3), np.uint8), 1, 1, rule)  # raises the registry's error, close names included
        self._count, self._height, self._width, self._rule = count, height, width, rule
        self._out = np.empty((count, height, width, 3), np.uint8)
        self._pending: list[np.ndarray] = []
        self._done = 0
        self._step = 1
        self._futures: list[Future[None]] = []
        self._threads = max(1, threads if threads > 0 else (os.cpu_count() or 1) // 2)
        self._pool: ThreadPoolExecutor | None = None
        self._blas: contextlib.AbstractContextManager[object] | None = None

    def __enter__(self) -> ResizeStream:
        from concurrent.futures import ThreadPoolExecutor

        self._blas = _single_threaded_blas()  # applies now, until __exit__
        self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="evr1-resize")
        return self

    def __exit__(self, *exc: object) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        blas, self._blas = self._blas, None
        if blas is not None:
            blas.__exit__(None, None, None)

    def add(self, frame: np.ndarray) -> None:
        """One more frame (uint8 `[H, W, 3]`, every frame of one size); the frame may be kept until its chunk is done."""
        count = self._count
        if self._pool is None:
            raise RuntimeError("ResizeStream is used outside its `with` block")
        if self._done + len(self._pending) >= count:
            raise ValueError(f"more than the {count} frames announced")
        if self._pending and (frame.shape != self._pending[0].shape or frame.dtype != self._pending[0].dtype):
            raise ValueError(f"expected uint8 frames [H, W, 3] of one size, got {frame.dtype} {frame.shape} after "
                             f"{self._pending[0].dtype} {self._pending[0].shape}")  # fmt: skip
        if not self._pending:
            self._step = max(1, _CHUNK_VALUES // max(1, frame.size))
        self._pending.append(frame)
        if len(self._pending) >= self._step:
            self._flush()

    def _flush(self) -> None:
        if not self._pending or self._pool is None:
            return
        chunk, at = self._pending, self._done
        self._pending, self._done = [], at + len(chunk)
        fn, height, width = RESAMPLERS[self._rule], self._height, self._width

        def work() -> None:
            self._out[at : at + len(chunk)] = fn(chunk, height, width, 1)

        self._futures.append(self._pool.submit(work))
        # backpressure: at most one waiting chunk per thread, so a decoder faster than the resize never piles up
        # decoded frames (evr1_cache.budget bounds the size of each)
        live = [f for f in self._futures if not f.done()]
        if len(live) > self._threads:
            from concurrent.futures import wait

            wait(live[: len(live) - self._threads])

    def result(self) -> np.ndarray:
        """Every frame resized, in the order added; raises what a resize raised, or ValueError if frames are missing."""
        self._flush()
        for future in self._futures:
            future.result()
        if self._done != self._count:
            raise ValueError(f"{self._done} frames added, {self._count} announced")
        return self._out


@register_resampler("torchvision-bicubic-aa")
def torchvision_bicubic_aa(frames: Frames, height: int, width: int, threads: int = 1) -> np.ndarray:
    """qwen-vl-utils' video resize as torch's x86-64 AVX2 / AVX-512 kernels compute it (see module docstring)."""
    return _chunked(frames, height, width, True, threads)


@register_resampler("torchvision-bicubic-aa-nofma")
def torchvision_bicubic_aa_nofma(frames: Frames, height: int, width: int, threads: int = 1) -> np.ndarray:
    """The same resize as torch's portable kernel computes it (no fused multiply-adds)."""
    return _chunked(frames, height, width, False, threads)


@register_resampler("pillow-bicubic")
def pillow_bicubic(frames: Frames, height: int, width: int, threads: int = 1) -> np.ndarray:
    """Pillow's antialiased bicubic, frame by frame (qwen-vl-utils' `fetch_image`); Pillow releases the GIL, so
    `threads` > 1 resizes frames in parallel (the result does not depend on it)."""
    import numpy as np
    from PIL import Image

    out = np.empty((len(frames), height, width, 3), np.uint8)

    def one(i: int) -> None:
        frame = frames[i]
        if frame.shape[0] == height and frame.shape[1] == width:
            out[i] = frame
        else:
            out[i] = np.asarray(Image.fromarray(frame).resize((width, height), Image.Resampling.BICUBIC))

    _in_threads(one, range(len(frames)), min(threads if threads > 0 else (os.cpu_count() or 1), len(frames)))
    return out
