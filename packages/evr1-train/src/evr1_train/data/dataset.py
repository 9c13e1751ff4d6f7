"""`Evr1Dataset`: verl's `data.custom_cls` for datasets written by `evr1-cache build` (EasyVideoR1 schema).

Why a subclass of verl's `RLHFDataset`: verl calls its classmethod `process_multi_modal_info` inside every
agent-loop worker to get pixels; ours serves cached frames + `VideoMeta` (the rollout gets `(frames, metadata)`, the
actor's processor `do_sample_frames=False`) instead of decoding with qwen-vl-utils. Rows may hold several videos
and images, or both; text-only rows work too. Settings live in `data.evr1` (see `DataOptions`).

Use: data.custom_cls.path=pkg://evr1_train.data.dataset data.custom_cls.name=Evr1Dataset
Names (stable): Evr1Dataset, OFFLINE_TEXT_FIELD
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from verl.utils.dataset.rl_dataset import RLHFDataset

from evr1_cache import MediaError, row_id
from evr1_train.data.options import DataOptions, data_folder
from evr1_train.data.row import (
    check_model_family,
    ground_truth_of,
    item_spec,
    load_media,
    loader_for,
    media_items,
    row_extra_info,
    row_messages,
)
from evr1_train.hybrid import OFFLINE_TEXT_FIELD, HybridConfig, row_offline_text

logger = logging.getLogger(__name__)


def _options(config: Any, data_files: Any = None) -> DataOptions:
    node = config.get("evr1", None) if hasattr(config, "get") else None
    return DataOptions.from_mapping(node, base_dir=data_folder(data_files))


class Evr1Dataset(RLHFDataset):  # type: ignore[misc]  # verl's RLHFDataset is Any to mypy (verl.*: follow_imports=skip, not installed for typecheck)
    """RLHFDataset whose prompts come from EasyVideoR1-style rows and whose pixels come from the evr1 frame cache."""

    dataframe: Any  # set by RLHFDataset

    def __init__(self, data_files: Any, tokenizer: Any, config: Any, processor: Any = None, max_samples: int = -1):
        self.evr1 = _options(config, data_files)
        self.family = check_model_family(self.evr1, processor if processor is not None else tokenizer)
        self._hybrid_keys = HybridConfig(
            enable=True, output_key=self.evr1.offline_output_key, flag_key=self.evr1.offline_flag_key
        )
        super().__init__(data_files, tokenizer, config, processor=processor, max_samples=max_samples)

    # -- rows -------------------------------------------------------------------------------------------------
    def _read_files_and_tokenize(self) -> None:
        from evr1_train.data.plan_check import check_row_specs

        super()._read_files_and_tokenize()
        if "evr1_plan" in getattr(self.dataframe, "column_names", ("evr1_plan",)):
            check_row_specs(list(self.dataframe), self.evr1)  # rows `build --plan` resampled: their own spec is usable
        self.dataframe = self._drop_rows_with_missing_media(self.dataframe)
        self.dataframe = self._check_prompt_lengths(self.dataframe)

    def _check_prompt_lengths(self, frame: Any) -> Any:
        """Refuse (or filter, `evr1.plan.on_over_limit`) rows longer than data.max_prompt_length, before step one."""
        from evr1_train.data.plan_check import check_prompt_lengths

        limit = getattr(self, "max_prompt_length", None)
        keep = check_prompt_lengths(list(frame), self.evr1, self.processor or self.tokenizer, self.family, limit)
        return frame.select(keep) if len(keep) != len(frame) else frame

    def _drop_rows_with_missing_media(self, frame: Any) -> Any:
        """Rows whose media can be served neither from the cache nor from disk are dropped with a logged reason.

        Such a row would otherwise fail inside a rollout worker and stop the whole run; one line per row names it.
        """
        loader = loader_for(self.evr1)
        mode = self.evr1.video_source
        paths = self.evr1.media_paths()

        def reason(row: dict[str, Any]) -> str | None:
            try:
                msgs = row_messages(row, self.evr1)
            except (ValueError, IndexError) as exc:
                return f"prompt: {exc}"
            for item in media_items(msgs):
                src, ref = item.get(item["type"]), item.get("evr1_cache")
                if not isinstance(src, str):  # inline image bytes
                    continue
                try:  # only media inside the media root are read from disk (evr1_cache.MediaPaths)
                    on_disk, outside = os.path.exists(paths.resolve(src)), ""
                except MediaError as exc:
                    on_disk, outside = False, f" ({exc.reason}; {exc.fix})"
                if item["type"] == "video":
                    in_cache = loader.cached(src, item_spec(item) or loader.video_spec, ref)
                    usable = in_cache or (mode != "cache_only" and on_disk)
                else:
                    usable = on_disk or loader.cached(src, loader.image_spec, ref)
                if not usable:
                    where = "in the cache" if mode == "cache_only" else "in the cache or on disk"
                    return f"{item['type']} {src} not found {where}{outside}"
            return None

        reasons = [reason(row) for row in frame]  # not datasets' filter: its cache would skip the logging on a rerun
        keep = [i for i, why in enumerate(reasons) if why is None]
        bad = [f"row {row_id(frame[i], i + 1)}: {why}" for i, why in enumerate(reasons) if why is not None]
        if bad:
            logger.warning(
                "evr1: dropped %d of %d rows whose media cannot be served; first: %s",
                len(bad),
                len(frame),
                "; ".join(bad[:5]),
            )
        self.dropped_rows = bad
        return frame.select(keep) if len(keep) != len(frame) else frame

    def _build_messages(self, example: dict[str, Any], key: str) -> list[dict[str, Any]]:
        return row_messages(example, self.evr1)

    def __getitem__(self, item: int) -> dict[str, Any]:
        row: dict[str, Any] = self.dataframe[item]
        extra = row_extra_info(row, self.evr1, int(item))
        offline = row_offline_text(row, self._hybrid_keys)
        return {
            "raw_prompt": row_messages(row, self.evr1),
            "data_source": str(row.get("data_source") or "evr1"),
            "reward_model": {"style": "rule", "ground_truth": ground_truth_of(row, self.evr1)},
            "extra_info": extra,
            "index": extra["index"],
            "tools_kwargs": {},
            "interaction_kwargs": {},
            OFFLINE_TEXT_FIELD: offline or "",
            # verl still needs one tensor so DataProto.batch is not empty.
            "dummy_tensor": torch.tensor([0], dtype=torch.uint8),
        }

    # -- pixels (called by verl's agent loop and by the length filter) ----------------------------------------
    @classmethod
    def _process_multi_modal_info(
        cls, messages: list[dict[str, Any]], image_patch_size: Any, config: Any
    ) -> tuple[list[Any] | None, list[Any] | None, None]:
        opts = _options(config)
        images, videos = load_media(messages, opts)
        if videos is not None:
            videos = [(_to_tchw(frames), meta) for frames, meta in videos]
        return images, videos, None


def _to_tchw(frames: Any) -> torch.Tensor:
    """uint8 [T,H,W,3] numpy -> uint8 [T,3,H,W] torch view (no copy): the layout qwen-vl-utils hands to verl."""
    t = frames if isinstance(frames, torch.Tensor) else torch.from_numpy(frames)
    return t.permute(0, 3, 1, 2)
