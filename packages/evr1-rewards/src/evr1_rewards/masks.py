"""Binary masks in pure Python: COCO RLE (list or compressed string) and polygons → one big-int bitset.

A mask is `Mask(h, w, bits)` with bit `x·h + y` set for foreground pixel (x, y): COCO's column-major order, so RLE
runs decode with C-speed slice assignments. IoU is popcount arithmetic; boundaries and dilations are bit shifts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_PIXELS = 1 << 24
"""Masks larger than 16 Mpx are rejected (a 4K frame is 8.3 Mpx)."""


def _to_int(buf: bytearray) -> int:
    """bytearray of b'0'/b'1' (index = bit position) → int."""
    return int(bytes(buf[::-1]) or b"0", 2)


@dataclass(frozen=True, slots=True)
class Mask:
    h: int
    w: int
    bits: int

    @property
    def area(self) -> int:
        return self.bits.bit_count()

    def contains(self, x: float, y: float) -> bool:
        xi, yi = math.floor(x), math.floor(y)
        if not (0 <= xi < self.w and 0 <= yi < self.h):
            return False
        return bool((self.bits >> (xi * self.h + yi)) & 1)

    def bbox(self) -> tuple[float, float, float, float] | None:
        """[x1, y1, x2, y2] in pixel edges (x2, y2 exclusive), or None for an empty mask."""
        if not self.bits:
            return None
        s = bin(self.bits)[2:][::-1].ljust(self.h * self.w, "0")
        xs = [x for x in range(self.w) if "1" in s[x * self.h : (x + 1) * self.h]]
        ys_min = min(s[x * self.h : (x + 1) * self.h].find("1") for x in xs)
        ys_max = max(s[x * self.h : (x + 1) * self.h].rfind("1") for x in xs)
        return float(xs[0]), float(ys_min), float(xs[-1] + 1), float(ys_max + 1)


def check_size(h: object, w: object) -> tuple[int, int]:
    if isinstance(h, bool) or isinstance(w, bool) or not isinstance(h, int) or not isinstance(w, int):
        raise ValueError(f"mask size must be two integers [h, w], got {[h, w]}")
    if h <= 0 or w <= 0 or h * w > MAX_PIXELS:
        raise ValueError(f"mask size {[h, w]} must be positive and at most {MAX_PIXELS} pixels")
    return h, w


def decode_rle_string(s: str) -> list[int]:
    """COCO's compressed RLE counts (6-bit characters, continuation bit, delta against counts[i-2])."""
    counts: list[int] = []
    p = 0
    n = len(s)
    while p < n:
        x = k = 0
        more = True
        while more:
            if p >= n:
                raise ValueError("truncated RLE string")
            c = ord(s[p]) - 48
            if not 0 <= c < 64:
                raise ValueError(f"invalid RLE character {s[p]!r}")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def from_rle(h: int, w: int, counts: Sequence[int] | str) -> Mask:
    """Runs alternate background/foreground, starting with background, over the column-major pixels."""
    h, w = check_size(h, w)
    runs = decode_rle_string(counts) if isinstance(counts, str) else list(counts)
    total = h * w
    buf = bytearray(b"0") * total
    pos = 0
    for i, c in enumerate(runs):
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ValueError(f"RLE run {i} is not a non-negative integer: {c!r}")
        if pos + c > total:
            raise ValueError(f"RLE runs cover {pos + c} pixels, more than {h}x{w}")
        if i % 2 == 1 and c:
            buf[pos : pos + c] = b"1" * c
        pos += c
    return Mask(h, w, _to_int(buf))


def from_polygons(h: int, w: int, polygons: Sequence[Sequence[float]]) -> Mask:
    """Rasterise polygons (flat [x1, y1, x2, y2, …] in pixels) by pixel centres, even-odd per polygon, unioned."""
    h, w = check_size(h, w)
    buf = bytearray(b"0") * (h * w)
    for poly in polygons:
        pts = [(float(poly[i]), float(poly[i + 1])) for i in range(0, len(poly) - 1, 2)]
        if len(pts) < 3 or not all(math.isfinite(c) for p in pts for c in p):
            continue
        edges = list(zip(pts, pts[1:] + pts[:1], strict=False))
        x_lo = max(0, math.floor(min(p[0] for p in pts)))
        x_hi = min(w - 1, math.ceil(max(p[0] for p in pts)))
        for x in range(x_lo, x_hi + 1):
            xc = x + 0.5
            ys = sorted(
                y0 + (xc - x0) * (y1 - y0) / (x1 - x0) for (x0, y0), (x1, y1) in edges if x0 <= xc < x1 or x1 <= xc < x0
            )
            base = x * h
            for a, b in zip(ys[0::2], ys[1::2], strict=False):
                y0i = max(0, math.ceil(a - 0.5))
                y1i = min(h - 1, math.floor(b - 0.5))
                if y1i >= y0i:
                    buf[base + y0i : base + y1i + 1] = b"1" * (y1i - y0i + 1)
    return Mask(h, w, _to_int(buf))


def iou(a: Mask, b: Mask) -> float:
    """Mask IoU; two empty masks → 1 (DAVIS convention)."""
    union = (a.bits | b.bits).bit_count()
    return 1.0 if union == 0 else (a.bits & b.bits).bit_count() / union


def reward_iou(pred: Mask, gold: Mask) -> float:
    """`iou`, or 0 when less than half of the predicted mask lies on the gold (see structured.MIN_PRECISION: a
    whole-frame mask is no answer)."""
    value = iou(pred, gold)
    if value == 0.0 or not pred.bits:
        return value
    return value if 2 * (pred.bits & gold.bits).bit_count() >= pred.bits.bit_count() else 0.0


def _rows(h: int, w: int, y: int) -> int:
    buf = bytearray(b"0") * (h * w)
    buf[y::h] = b"1" * w
    return _to_int(buf)


def _column(h: int, x: int) -> int:
    return ((1 << h) - 1) << (x * h)


def boundary(m: Mask) -> int:
    """DAVIS's `seg2bmap`: pixels whose value differs from their east, south or south-east neighbour (outside the image
    is background); the last row compares east only, the last column south only, the bottom-right corner never."""
    h, w, b = m.h, m.w, m.bits
    last_row, last_col = _rows(h, w, h - 1), _column(h, w - 1)
    east = b >> h  # value of (x+1, y) at (x, y)
    south = (b >> 1) & ~last_row  # value of (x, y+1)
    south_east = (east >> 1) & ~last_row  # value of (x+1, y+1)
    bmap = (b ^ east) | (b ^ south) | (b ^ south_east)
    bmap = (bmap & ~last_row) | ((b ^ east) & last_row)
    bmap = (bmap & ~last_col) | ((b ^ south) & last_col)
    return bmap & ~(1 << ((w - 1) * h + h - 1))


def dilate(bits: int, h: int, w: int, radius: int) -> int:
    """Dilation by a disk of `radius` pixels (skimage's `disk`: offsets with dx² + dy² <= radius², as DAVIS uses):
    vertical dilations by 0..radius, each shifted across the columns it reaches."""
    full = (1 << (h * w)) - 1
    top, bottom = _rows(h, w, 0), _rows(h, w, h - 1)
    vertical = [bits]
    for _ in range(radius):
        cur = vertical[-1]
        vertical.append(cur | ((cur << 1) & ~top & full) | ((cur >> 1) & ~bottom))
    out = 0
    for dx in range(-radius, radius + 1):
        col = vertical[math.isqrt(radius * radius - dx * dx)]
        out |= ((col << (dx * h)) & full) if dx >= 0 else (col >> (-dx * h))
    return out


def boundary_f(pred: Mask, gt: Mask, bound_th: float = 0.008) -> float:
    """DAVIS boundary F-measure: `seg2bmap` boundaries matched within a disk of radius ceil(bound_th · diagonal)."""
    radius = max(1, math.ceil(bound_th * math.hypot(gt.h, gt.w)))
    bp, bg = boundary(pred), boundary(gt)
    np_, ng = bp.bit_count(), bg.bit_count()
    if np_ == 0 and ng == 0:
        return 1.0
    if np_ == 0 or ng == 0:
        return 0.0
    precision = (bp & dilate(bg, gt.h, gt.w, radius)).bit_count() / np_
    recall = (bg & dilate(bp, gt.h, gt.w, radius)).bit_count() / ng
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def j_and_f(pred: Mask, gt: Mask) -> tuple[float, float, float]:
    """(J, F, (J + F) / 2) for one frame."""
    j = iou(pred, gt)
    f = boundary_f(pred, gt)
    return j, f, (j + f) / 2
