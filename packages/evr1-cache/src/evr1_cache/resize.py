"""Resize sampled frames to the spec's size: Pillow bicubic with antialiasing, one frame at a time.

Why Pillow: it is what qwen-vl-utils uses for images (so cached images are identical to `fetch_image`), it keeps torch
out of the package, and its antialiased bicubic is the filter torchvision's `antialias=True` bicubic imitates
(differences are rounding-level, see docs/cache.md). Pillow releases the GIL while resizing, so frames are resized on
several threads when asked (the result does not depend on the thread count).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def resize_frames(frames: Sequence[np.ndarray], height: int, width: int, *, threads: int = 1) -> np.ndarray:
    """uint8 frames `[H, W, 3]` (a list or a `[T, H, W, 3]` array) -> one uint8 `[T, height, width, 3]` array;
    `threads=0` uses every core."""
    import numpy as np
    from PIL import Image

    out = np.empty((len(frames), height, width, 3), np.uint8)

    def one(i: int) -> None:
        frame = frames[i]
        if frame.shape[0] == height and frame.shape[1] == width:
            out[i] = frame
        else:
            out[i] = np.asarray(Image.fromarray(frame).resize((width, height), Image.Resampling.BICUBIC))

    n = threads if threads > 0 else (os.cpu_count() or 1)
    n = min(n, len(frames))
    if n <= 1:
        for i in range(len(frames)):
            one(i)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=n) as pool:
            list(pool.map(one, range(len(frames))))
    return out
