"""evr1-cache: decode each video once, serve the exact sampled frames (Qwen-VL frame-selection spec) forever.

The public API is what this module exports (other packages import nothing else, an import-linter contract checks it;
`evr1_cache.spec` is public too, standard-library only). Importing the package is light: only the stdlib spec is
loaded eagerly; everything that needs numpy, PyAV or Pillow is imported on first use.

- the contract: `SamplingSpec`, `ImageSpec`, `VideoMeta`, the frame rules, and the named resize rules
  (`ResizeRule`, `register_resize_rule`, `get_resize_rule`; `VIDEO_RESIZE`, `IMAGE_RESIZE`)
- reading: `CacheReader` -> `CacheEntry` (frames + `VideoMeta`/`ImageMeta` + spec key + `Source`), `CacheMiss`,
  `CorruptEntry`; `CacheReader.ensure` writes through
- building: `build_cache` -> `BuildReport`; `EntryJob` / `EntryResult`; `verify_cache` -> `VerifyReport`
- media paths: `MediaPaths` (resolve and confine a row's media path), `MediaPathError`, `add_media_path_args`;
  remote media only when asked: `RemoteMedia` (download once), `ALLOW_REMOTE_FLAG`, `REMOTE_SCHEMES`,
  `parse_remote_schemes`
- media: `decode_video`, `write_video` (the one encoder, reproducible bytes), `load_image`, `probe` -> `VideoInfo`,
  `resample` / `ResizeStream` / `register_resampler`, `MediaError`
- media for every consumer: `MediaLoader` (modes `cache-only` / `prefer-cache` / `decode`) -> `VideoFrames` /
  `ImageFrames`, `MediaMissError`, `media_mode`, `media_key`
- model paths (training and evaluation): `check_model_path`, `resolve_model_path`, `latest_step`,
  `explain_load_error`, `ModelPathError`
- the train -> eval settings file (`evr1_train_protocol.json`): `TrainSettings` (`PromptSettings`,
  `GenerationSettings`, `spec_record`), `TrainSettingsError`, `TRAIN_SETTINGS_FILE`
- agent tools (a public subpackage): `evr1_cache.tools` (`get_frames`, `zoom`, `register_tool`, `ToolSession`)
- datasets: `read_dataset` -> `DatasetRows` of `Row`s and `RowError`s (line-numbered), `read_rows`, `row_id` (how a
  row is named everywhere), `cache_refs` (a built row's cache references), `DatasetError`
- the prompt record (`evr1_cache.prompt_record`, stdlib): `PromptRecord` (the exact prompt a model was sent and its
  hash, written where a prompt is built, read by every viewer), `PromptRecordError`
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The model families (standard library only) install their lookup into the spec, so a `SamplingSpec(family=...)`
# resolves whichever evr1_cache module is imported first (Python runs this `__init__` before any submodule).
import evr1_cache.families  # noqa: F401
from evr1_cache.lazy import lazy_exports
from evr1_cache.spec import (
    IMAGE_RESIZE,
    RESIZE_RULES,
    VIDEO_RESIZE,
    ImageSpec,
    ResizeRule,
    SamplingSpec,
    VideoMeta,
    get_resize_rule,
    register_resize_rule,
    resized_hw,
    resized_image_hw,
    sample_frame_indices,
)

if TYPE_CHECKING:
    from evr1_cache.build import BuildReport, EntryJob, EntryResult, build_cache
    from evr1_cache.dataset import (
        BOOKKEEPING_COLUMNS,
        DatasetError,
        DatasetRows,
        Row,
        RowError,
        cache_refs,
        read_dataset,
        read_rows,
        row_id,
    )
    from evr1_cache.decode import decode_video
    from evr1_cache.encode import write_video
    from evr1_cache.entry import CacheEntry, ImageMeta, Source
    from evr1_cache.errors import CacheMiss, CorruptEntry, MediaError
    from evr1_cache.image import load_image
    from evr1_cache.media import ImageFrames, MediaLoader, MediaMissError, MediaMode, VideoFrames, media_key, media_mode
    from evr1_cache.model_path import (
        ModelPathError,
        check_model_path,
        explain_load_error,
        latest_step,
        resolve_model_path,
    )
    from evr1_cache.mrope import reference_rope_index, use_reference_mrope
    from evr1_cache.paths import ALLOW_OUTSIDE_FLAG, MediaPathError, MediaPaths, add_media_path_args
    from evr1_cache.probing import VideoInfo, probe
    from evr1_cache.prompt_record import PromptRecord, PromptRecordError
    from evr1_cache.reader import CacheReader
    from evr1_cache.remote import ALLOW_REMOTE_FLAG, REMOTE_SCHEMES, RemoteMedia, parse_remote_schemes
    from evr1_cache.resampling import ResizeStream, register_resampler, resample
    from evr1_cache.train_settings import (
        TRAIN_SETTINGS_FILE,
        GenerationSettings,
        PromptSettings,
        TrainSettings,
        TrainSettingsError,
        spec_record,
    )
    from evr1_cache.verify import VerifyReport, verify_cache

#: Each lazy name by the submodule that defines it (imported on first use: `evr1_cache.lazy`).
_LAZY = {
    name: f"evr1_cache.{module}"
    for module, names in {
        "prompt_record": "PromptRecord PromptRecordError",
        "build": "BuildReport EntryJob EntryResult build_cache",
        "dataset": "DatasetError DatasetRows Row RowError cache_refs read_dataset read_rows row_id BOOKKEEPING_COLUMNS",
        "decode": "decode_video",
        "encode": "write_video",
        "entry": "CacheEntry ImageMeta Source",
        "errors": "CacheMiss CorruptEntry MediaError",
        "image": "load_image",
        "paths": "ALLOW_OUTSIDE_FLAG MediaPathError MediaPaths add_media_path_args",
        "remote": "ALLOW_REMOTE_FLAG REMOTE_SCHEMES RemoteMedia parse_remote_schemes",
        "media": "ImageFrames MediaLoader MediaMissError MediaMode VideoFrames media_key media_mode",
        "model_path": "ModelPathError check_model_path explain_load_error latest_step resolve_model_path",
        "mrope": "reference_rope_index use_reference_mrope",
        "probing": "VideoInfo probe",
        "reader": "CacheReader",
        "resampling": "register_resampler resample ResizeStream",
        "train_settings": "TRAIN_SETTINGS_FILE GenerationSettings PromptSettings TrainSettings TrainSettingsError "
        "spec_record",
        "verify": "VerifyReport verify_cache",
    }.items()
    for name in names.split()
}

__all__ = [
    "ALLOW_OUTSIDE_FLAG",
    "ALLOW_REMOTE_FLAG",
    "BOOKKEEPING_COLUMNS",
    "IMAGE_RESIZE",
    "REMOTE_SCHEMES",
    "RESIZE_RULES",
    "TRAIN_SETTINGS_FILE",
    "VIDEO_RESIZE",
    "BuildReport",
    "CacheEntry",
    "CacheMiss",
    "CacheReader",
    "CorruptEntry",
    "DatasetError",
    "DatasetRows",
    "EntryJob",
    "EntryResult",
    "GenerationSettings",
    "ImageFrames",
    "ImageMeta",
    "ImageSpec",
    "MediaError",
    "MediaLoader",
    "MediaMissError",
    "MediaMode",
    "MediaPathError",
    "MediaPaths",
    "ModelPathError",
    "PromptRecord",
    "PromptRecordError",
    "PromptSettings",
    "RemoteMedia",
    "ResizeRule",
    "ResizeStream",
    "Row",
    "RowError",
    "SamplingSpec",
    "Source",
    "TrainSettings",
    "TrainSettingsError",
    "VerifyReport",
    "VideoFrames",
    "VideoInfo",
    "VideoMeta",
    "__version__",
    "add_media_path_args",
    "build_cache",
    "cache_refs",
    "check_model_path",
    "decode_video",
    "explain_load_error",
    "get_resize_rule",
    "latest_step",
    "load_image",
    "media_key",
    "media_mode",
    "parse_remote_schemes",
    "probe",
    "read_dataset",
    "read_rows",
    "reference_rope_index",
    "register_resampler",
    "register_resize_rule",
    "resample",
    "resized_hw",
    "resized_image_hw",
    "resolve_model_path",
    "row_id",
    "sample_frame_indices",
    "spec_record",
    "use_reference_mrope",
    "verify_cache",
    "write_video",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, dist="evr1-cache")
