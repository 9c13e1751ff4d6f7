"""The resampler's own arithmetic, without torch: the exact float32 FMA, the fast path against the exact path on every
pixel, the error bound, and the registry. (Parity with the real torchvision: test_resample_parity.py.)"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import evr1_cache.resampling as rs
from evr1_cache import get_resize_rule, register_resampler, resample

SHAPES = [  # (H, W, h, w): down, up, mixed, one axis only, extreme ratio
    (60, 80, 28, 56),
    (28, 36, 84, 112),
    (37, 200, 112, 56),
    (50, 50, 50, 84),
    (50, 50, 28, 50),
    (10, 150, 28, 420),
]


def _nearest_f32(x: Fraction) -> np.float32:
    """The float32 nearest to the exact rational `x` (ties to even), by checking the neighbours of a close guess."""
    guess = np.float32(float(x))
    cands = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    dist = [abs(Fraction(float(c)) - x) for c in cands]
    best = min(dist)
    ties = [c for c, d in zip(cands, dist, strict=True) if d == best]
    return min(ties, key=lambda c: int(np.array(c).view(np.uint32)) & 1)


def test_fma32_rounds_once_exactly() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(3000).astype(np.float32) * np.float32(255)
    b = rng.standard_normal(3000).astype(np.float32)
    c = rng.standard_normal(3000).astype(np.float32) * np.float32(300)
    # hard cases: c cancels a*b almost exactly, so a double-rounded sum would often be wrong
    c[:1000] = -(a[:1000] * b[:1000]).astype(np.float32)
    c[1000:1500] = np.float32(1e-30)
    got = rs.fma32(a, b, c)
    want = [_nearest_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)]
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), np.array(want, np.float32).view(np.uint32))
    plain = (a * b + c).astype(np.float32)
    assert not np.array_equal(plain, got)  # the fused result is really different from mul-then-add


def test_axis_weights_are_normalised_and_cover_the_support() -> None:
    for n_in, n_out in [(1280, 588), (144, 308), (100, 100), (7, 3), (3, 700)]:
        for fused in (True, False):
            aw = rs.axis_weights(n_in, n_out, fused)
            sums = aw.weights.astype(np.float64).sum(axis=1)
            assert np.allclose(sums, 1.0, atol=1e-6)
            assert (aw.start >= 0).all()
            assert (aw.start + aw.size <= n_in).all()
            assert (aw.size >= 1).all()
            assert not aw.weights.flags.writeable
    down = rs.axis_weights(1280, 588, True)
    assert int(down.size.max()) == 9  # support 2 x scale on each side when shrinking
    up = rs.axis_weights(144, 308, True)
    assert int(up.size.max()) == 4  # bicubic's 4 taps when enlarging


def _exact_everywhere(frames: np.ndarray, h: int, w: int, fused: bool) -> np.ndarray:
    """torch's arithmetic on every pixel (the slow path the fast one must equal)."""
    n, h_in, w_in, _ = frames.shape
    wh = rs.axis_weights(w_in, w, fused) if w != w_in else None
    wv = rs.axis_weights(h_in, h, fused) if h != h_in else None
    t, y, x, c = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(h), np.arange(w), np.arange(3), indexing="ij"))
    vals = rs._exact_pixels(frames, t, y, x, c, wh, wv)
    return np.clip(np.rint(vals), 0, 255).astype(np.uint8).reshape(n, h, w, 3)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("rule", ["torchvision-bicubic-aa", "torchvision-bicubic-aa-nofma"])
def test_fast_path_equals_the_exact_path_on_every_pixel(shape: tuple[int, int, int, int], rule: str) -> None:
    rng = np.random.default_rng(sum(shape))
    h_in, w_in, h, w = shape
    noise = rng.integers(0, 256, (2, h_in, w_in, 3), dtype=np.uint8)
    smooth = np.clip(np.cumsum(rng.integers(-4, 5, (1, h_in, w_in, 3)), axis=2) + 128, 0, 255).astype(np.uint8)
    stripes = np.zeros((1, h_in, w_in, 3), np.uint8)
    stripes[:, ::2, ::2], stripes[:, 1::2, 1::2] = 7, 8  # a checkerboard: exact values on rounding ties
    frames = np.concatenate([noise, smooth, stripes])
    got = resample(frames, h, w, rule)
    assert got.shape == (4, h, w, 3)
    assert got.dtype == np.uint8
    assert np.array_equal(got, _exact_everywhere(frames, h, w, rule == "torchvision-bicubic-aa"))


def test_the_exact_fix_up_is_needed_and_the_bound_is_tight(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, (4, 90, 160, 3), dtype=np.uint8)
    stripes = np.zeros((1, 90, 160, 3), np.uint8)
    stripes[:, :, ::2], stripes[:, :, 1::2] = 100, 101  # exact values land on x.5: BLAS's rounding would decide
    exact_noise = resample(noise, 56, 84, "torchvision-bicubic-aa")
    exact_stripes = resample(stripes, 56, 84, "torchvision-bicubic-aa")
    flagged: list[int] = []
    real = rs._exact_pixels

    def spy(frames: np.ndarray, t: np.ndarray, *args: object) -> np.ndarray:
        flagged.append(len(t))
        return real(frames, t, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rs, "_exact_pixels", spy)
    assert np.array_equal(resample(noise, 56, 84, "torchvision-bicubic-aa"), exact_noise)
    assert 0 < sum(flagged) / exact_noise.size < 0.01  # on natural content a fraction of a percent is recomputed
    monkeypatch.setattr(rs, "_margin", lambda wh, wv: -1.0)  # never fix up: BLAS's rounding alone
    approx = resample(stripes, 56, 84, "torchvision-bicubic-aa")
    assert (approx != exact_stripes).sum() > 20
    assert int(np.abs(approx.astype(int) - exact_stripes).max()) == 1


def test_the_two_torch_builds_differ_by_at_most_one_level_on_few_pixels() -> None:
    rng = np.random.default_rng(3)
    frames = np.clip(np.cumsum(rng.integers(-3, 4, (6, 180, 320, 3)), axis=2) + 128, 0, 255).astype(np.uint8)
    fused = resample(frames, 112, 196, "torchvision-bicubic-aa")
    plain = resample(frames, 112, 196, "torchvision-bicubic-aa-nofma")
    diff = np.abs(fused.astype(int) - plain)
    assert diff.max() <= 1
    assert 0 <= (diff > 0).mean() < 1e-3


def test_identity_threads_pillow_and_validation() -> None:
    from PIL import Image

    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, (5, 40, 60, 3), dtype=np.uint8)
    assert resample(frames, 40, 60, "torchvision-bicubic-aa") is frames  # torchvision returns the input unchanged
    one = resample(frames, 28, 84, "torchvision-bicubic-aa", threads=1)
    assert np.array_equal(one, resample(frames, 28, 84, "torchvision-bicubic-aa", threads=3))
    assert np.array_equal(one, resample(list(frames), 28, 84, "torchvision-bicubic-aa"))
    pil = resample(frames, 28, 84, "pillow-bicubic")
    assert np.array_equal(pil[2], np.asarray(Image.fromarray(frames[2]).resize((84, 28), Image.Resampling.BICUBIC)))
    assert np.array_equal(pil, resample(frames, 28, 84, "pillow-bicubic", threads=0))
    with pytest.raises(ValueError, match="uint8 frames"):
        resample(frames.astype(np.float32), 28, 84, "torchvision-bicubic-aa")
    with pytest.raises(ValueError, match="did you mean 'pillow-bicubic'"):
        resample(frames, 28, 84, "pillow-bicubik")


def test_resamplers_register_only_for_declared_rules() -> None:
    with pytest.raises(ValueError, match="unknown resize rule"):
        register_resampler("no-such-rule")
    with pytest.raises(ValueError, match="already registered"):
        register_resampler("pillow-bicubic")(rs.pillow_bicubic)
    assert set(rs.RESAMPLERS) >= {"torchvision-bicubic-aa", "torchvision-bicubic-aa-nofma", "pillow-bicubic"}
    assert get_resize_rule("torchvision-bicubic-aa").version == 1


def test_resize_stream_equals_resample_and_refuses_misuse(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    frames = rng.integers(0, 256, (7, 45, 70, 3), dtype=np.uint8)
    monkeypatch.setattr(rs, "_CHUNK_VALUES", 2 * frames[0].size)  # chunks of two frames, the last one of one
    for rule in ("torchvision-bicubic-aa", "pillow-bicubic"):
        with rs.ResizeStream(len(frames), 30, 84, rule, threads=2) as stream:
            for f in frames:
                stream.add(f)
            assert np.array_equal(stream.result(), resample(frames, 30, 84, rule))
    with rs.ResizeStream(2, 30, 84, "torchvision-bicubic-aa") as stream:
        stream.add(frames[0])
        with pytest.raises(ValueError, match="of one size"):
            stream.add(frames[1, :40])
        with pytest.raises(ValueError, match="1 frames added, 2 announced"):
            stream.result()
        stream.add(frames[1])
        with pytest.raises(ValueError, match="more than the 2 frames"):
            stream.add(frames[2])
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        rs.ResizeStream(1, 30, 84, "torchvision-bicubic-aa").add(frames[0])
    with pytest.raises(ValueError, match="did you mean"):
        rs.ResizeStream(1, 30, 84, "pillow-bicubik")
