"""`Evr1SFTDataset`: verl's SFT trainer (`verl.trainer.sft_trainer`, `data.custom_cls`) on evr1 rows and cached frames.

Why: the warm start must see the prompts, frames and timestamps RL and evaluation see. verl 0.9.1's
`MultiTurnSFTDataset` supports vision-language models (a processor, `<image>` / `<video>` placeholders), but reads a
Parquet `messages` column and decodes every video again with qwen-vl-utils. This subclass reads the rows
`evr1-cache build` writes (JSONL / JSON / Parquet), builds the user turn with `evr1_train.data` (the RL prompt, the
frame cache, the video/image budgets) and the assistant turn from `data.response_key` (default `offline_output`), and
returns exactly what verl's class returns for the same conversation — `input_ids`, `loss_mask` (the assistant turn
after its generation prompt), `position_ids` (Qwen-VL's 4-row M-RoPE ids through verl's own `get_rope_index`),
`attention_mask` with right padding, `multi_modal_inputs` — which a test checks token for token against verl's class.

verl config (see conf/evr1_sft.yaml): data.custom_cls.path=pkg://evr1_train.data.sft_dataset,
data.custom_cls.name=Evr1SFTDataset, data.evr1 (as in RL), data.response_key.
Names (stable): Evr1SFTDataset, sft_conversation(row, opts, response_key)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from evr1_train.data.options import DataOptions, data_folder
from evr1_train.data.row import row_to_inputs

logger = logging.getLogger(__name__)


def sft_conversation(row: Mapping[str, Any], opts: DataOptions, response_key: str) -> list[dict[str, Any]]:
    """The row as chat messages: evr1's user turn (media items in placeholder order) + the assistant's response."""
    response = row.get(response_key)
    if not isinstance(response, str) or not response.strip():
        raise ValueError(f"no response text in column {response_key!r} (data.response_key)")
    messages = row_to_inputs(row, opts, 0, None).messages
    return [*messages, {"role": "assistant", "content": [{"type": "text", "text": response}]}]


class Evr1SFTDataset(MultiTurnSFTDataset):  # type: ignore[misc]  # verl's MultiTurnSFTDataset is Any to mypy (verl.*: follow_imports=skip, not installed for typecheck)
    """verl's multi-turn SFT dataset contract, filled from evr1 rows, prompts and the frame cache."""

    def __init__(
        self,
        parquet_files: Any,
        tokenizer: Any,
        config: Any,
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        from evr1_train.engine.config import plain

        files = [parquet_files] if isinstance(parquet_files, str) else [str(f) for f in parquet_files]
        self.evr1 = DataOptions.from_mapping(plain(config.get("evr1", None)), base_dir=data_folder(files))
        self.response_key = str(config.get("response_key", None) or self.evr1.offline_output_key)
        super().__init__(files, tokenizer, config, processor=processor, max_samples=max_samples)

    def _read_files_and_process(self) -> None:
        """Rows of every file; rows without a response or whose prompt cannot be built are dropped (logged)."""
        from evr1_cache import read_rows, row_id

        rows = read_rows(*self.parquet_files)
        if 0 < self.max_samples < len(rows):
            rows = rows[: self.max_samples]
        self.rows: list[dict[str, Any]] = []
        bad: list[str] = []
        for i, row in enumerate(rows):
            try:
                sft_conversation(row, self.evr1, self.response_key)
            except (ValueError, IndexError, KeyError) as exc:
                bad.append(f"row {row_id(row, i + 1)}: {exc}")
                continue
            self.rows.append(row)
        if bad:
            logger.warning("evr1 SFT data: dropped %d of %d rows; first: %s", len(bad), len(rows), "; ".join(bad[:3]))
        self.messages = [None] * len(self.rows)  # verl's __len__ counts these
        self.tools = None
        self.enable_thinking = None

    def _encode(self, row: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(input_ids, loss_mask, vision inputs) of the whole conversation, pixels from the cache."""
        from evr1_train.engine.batch import video_kwargs, vision_tensors

        inputs = row_to_inputs(row, self.evr1, 0, None)
        conversation = sft_conversation(row, self.evr1, self.response_key)
        processor = self.processor if self.processor is not None else self.tokenizer
        prompt_text = processor.apply_chat_template(inputs.messages, add_generation_prompt=True, tokenize=False)
        full_text = processor.apply_chat_template(conversation, add_generation_prompt=False, tokenize=False)
        if not full_text.startswith(prompt_text):
            raise ValueError("the chat template renders the prompt differently with and without the answer")
        if self.processor is None:
            ids = self.tokenizer(full_text, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
            n_prompt = len(self.tokenizer(prompt_text, add_special_tokens=False)["input_ids"])
            return ids, (torch.arange(len(ids)) >= n_prompt).long(), {}
        media = {**({"images": list(inputs.images)} if inputs.images else {}), **video_kwargs(inputs.videos)}
        full = self.processor(text=[full_text], return_tensors="pt", **media)
        prompt = self.processor(text=[prompt_text], return_tensors="pt", **media)
        ids = full["input_ids"][0]
        n_prompt = int(prompt["input_ids"].shape[1])
        if not torch.equal(ids[:n_prompt], prompt["input_ids"][0]):
            raise ValueError("the prompt's tokens are not a prefix of the conversation's tokens")
        vision = vision_tensors(full)
        return ids, (torch.arange(len(ids)) >= n_prompt).long(), vision

    def __getitem__(self, item: int) -> dict[str, Any]:
        ids, loss_mask, vision = self._encode(self.rows[item])
        attention_mask = torch.ones_like(ids)
        if self.processor is not None and "Qwen2VLImageProcessor" in type(self.processor.image_processor).__name__:
            from verl.models.transformers.qwen2_vl import get_rope_index

            rope = get_rope_index(
                self.processor,
                input_ids=ids,
                image_grid_thw=vision.get("image_grid_thw"),
                video_grid_thw=vision.get("video_grid_thw"),
                second_per_grid_ts=vision.get("second_per_grid_ts"),
                attention_mask=attention_mask,
            )
            position_ids = torch.cat([torch.arange(len(ids), dtype=torch.long).unsqueeze(0), rope], dim=0)
        else:
            position_ids = torch.arange(len(ids), dtype=torch.long)
        out = self._fit(ids, loss_mask, attention_mask, position_ids)
        if vision:
            out["multi_modal_inputs"] = vision
        return out

    def _fit(
        self, ids: torch.Tensor, loss_mask: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """verl's length handling: right-pad (or cut, per `truncation`) to max_length, or no padding at all."""
        n, limit = len(ids), self.max_length
        if n > limit and self.truncation == "error":
            raise ValueError(f"sequence of {n} tokens is longer than data.max_length={limit}")
        if self.pad_mode == "no_padding":
            return {"input_ids": ids[:limit], "position_ids": position_ids[..., :limit], "loss_mask": loss_mask[:limit]}
        if n > limit:
            keep = slice(n - limit, n) if self.truncation == "left" else slice(0, limit)
            ids, loss_mask, attention_mask = ids[keep], loss_mask[keep], attention_mask[keep]
            position_ids = position_ids[..., keep]
        pad = limit - len(ids)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return {
            "input_ids": F.pad(ids, (0, pad), value=pad_id),
            "attention_mask": F.pad(attention_mask, (0, pad), value=0),
            "position_ids": F.pad(position_ids, (0, pad), value=0),
            "loss_mask": F.pad(loss_mask, (0, pad), value=0),
        }
