"""Images with their own pixel budget (`ImageSpec`), prepared exactly as qwen-vl-utils' `fetch_image` does."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from evr1_cache.errors import MediaError
from evr1_cache.sources import media_file
from evr1_cache.spec import ImageSpec, resized_image_hw

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image as PILImage


def load_image(path: str | os.PathLike[str], image_spec: ImageSpec) -> np.ndarray:
    """RGB uint8 `[H, W, 3]` resized to `resized_image_hw` with the spec's resize rule (transparent pixels composited on
    white, like Qwen; the default rule is `fetch_image`'s Pillow bicubic)."""
    from PIL import Image, UnidentifiedImageError

    p = media_file(path)
    try:
        with Image.open(p) as img:
            img.load()
            rgb = _to_rgb(img)
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        raise MediaError(str(p), f"not a readable image ({type(exc).__name__}: {exc})", "re-save the image") from exc
    return image_pixels(rgb, image_spec, str(p))


def image_pixels(img: PILImage.Image, image_spec: ImageSpec, name: str) -> np.ndarray:
    """An opened image prepared as `load_image` prepares a file (`name` names it in errors)."""
    import numpy as np

    rgb = img if img.mode == "RGB" else _to_rgb(img)
    try:
        h, w = resized_image_hw(rgb.height, rgb.width, image_spec)
    except ValueError as exc:
        raise MediaError(name, f"cannot be resized under the image spec: {exc}", "crop or pad the image") from exc
    from evr1_cache.resampling import resample

    out: np.ndarray = resample([np.asarray(rgb, dtype=np.uint8)], h, w, image_spec.resize)[0]
    return out


def _to_rgb(img: PILImage.Image) -> PILImage.Image:
    from PIL import Image

    if img.mode == "RGBA":
        white = Image.new("RGB", img.size, (255, 255, 255))
        white.paste(img, mask=img.split()[3])
        return white
    return img.convert("RGB")
