"""evr1-cache: decode each video once, serve the exact sampled frames (Qwen-VL frame-selection spec) forever.

Importing the package is light: only the stdlib spec is loaded eagerly; everything that needs numpy, PyAV or
safetensors (`CacheReader`, `build_cache`, `decode_video`, `load_image`, `probe`) is imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta, resized_hw, resized_image_hw, sample_frame_indices

if TYPE_CHECKING:
    from evr1_cache.build import BuildReport, build_cache
    from evr1_cache.decode import decode_video
    from evr1_cache.errors import MediaError
    from evr1_cache.image import load_image
    from evr1_cache.probing import VideoInfo, probe
    from evr1_cache.reader import CacheReader

__version__ = "0.1.0"

_LAZY = {
    "CacheReader": "evr1_cache.reader",
    "build_cache": "evr1_cache.build",
    "BuildReport": "evr1_cache.build",
    "decode_video": "evr1_cache.decode",
    "load_image": "evr1_cache.image",
    "probe": "evr1_cache.probing",
    "VideoInfo": "evr1_cache.probing",
    "MediaError": "evr1_cache.errors",
}

__all__ = [
    "BuildReport",
    "CacheReader",
    "ImageSpec",
    "MediaError",
    "SamplingSpec",
    "VideoInfo",
    "VideoMeta",
    "__version__",
    "build_cache",
    "decode_video",
    "load_image",
    "probe",
    "resized_hw",
    "resized_image_hw",
    "sample_frame_indices",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evr1_cache' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
