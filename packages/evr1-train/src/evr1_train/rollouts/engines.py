"""The two engines' hooks into the rollout dump: `attach_local` (local engine) and `maybe_dump_verl` (verl's V1
trainer, called from the `evr1` trainer mode's metrics step). Both build the same records (`writer.group_record`).

A dump never stops training: any failure while dumping is logged as a warning and the step goes on.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from evr1_cache import row_id as name_row
from evr1_train.rollouts.writer import DumpConfig, RolloutDumpWriter, group_record, media_records, tool_media_records

logger = logging.getLogger(__name__)


def dump_config(cfg: Any) -> DumpConfig:
    from evr1_train.engine.config import _get, plain

    return DumpConfig.from_mapping(plain(_get(cfg, "evr1.rollout_dump")))


def _writer(config: DumpConfig, folder: Path, opts: Any, engine: str) -> RolloutDumpWriter:
    return RolloutDumpWriter(
        Path(config.dir) if config.dir else folder,
        config,
        engine=engine,
        cache_dir=opts.cache_dir,
        video_spec=opts.video_spec().to_dict(),
        image_spec=opts.image_spec().to_dict(),
    )


# -- local engine ----------------------------------------------------------------------------------------------------
class LocalDumpHook:
    """`LocalTrainer.on_rollout`: called by `step()` with the step's prompts, sequences and advantages."""

    def __init__(self, trainer: Any, writer: RolloutDumpWriter) -> None:
        self.trainer = trainer
        self.writer = writer

    def __call__(self, step: int, prompts: Any, seqs: Any, adv: Any, resp_mask: Any) -> None:
        if not self.writer.config.due(step):
            return
        try:
            self.writer.write_step(step, self.groups(prompts, seqs, adv, resp_mask))
        except Exception as exc:  # a dump is a diagnostic: never the reason a run dies
            logger.warning("rollout dump of step %d failed (%s: %s); training goes on", step, type(exc).__name__, exc)

    def groups(self, prompts: Any, seqs: Any, adv: Any, resp_mask: Any) -> list[dict[str, Any]]:
        from evr1_train.data import row_messages

        trainer = self.trainer
        opts = trainer.data_opts
        vspec, ispec = opts.video_spec(), opts.image_spec()
        mask = resp_mask.float()
        per_seq = ((adv * mask).sum(-1) / mask.sum(-1).clamp_min(1)).tolist()
        by_prompt: dict[int, list[int]] = defaultdict(list)
        for i, s in enumerate(seqs):
            by_prompt[s.prompt].append(i)
        overlong = bool(getattr(trainer.cfg, "overlong_buffer_len", 0))
        agent = getattr(trainer, "agent", None)  # an agent trainer: its tools' streams, for the frames they returned
        streams = (
            {"frames": agent.tool_config.frames_spec(), "detail": agent.tool_config.detail_spec()} if agent else {}
        )
        out = []
        for p, prompt in enumerate(prompts):
            row = getattr(prompt, "row", None)
            messages = row_messages(row, opts) if row is not None else []
            responses = []
            tool_media: list[dict[str, Any]] = []
            for j, i in enumerate(by_prompt.get(p, [])):
                s = seqs[i]
                reward = {"overall": s.overall, "accuracy": s.accuracy, "format": s.format}
                if overlong:
                    reward["overlong_penalty"] = s.overlong_penalty
                text, details = s.text, dict[str, str]()
                if s.episode is not None and s.episode.session is not None:  # every turn, its calls and their frames
                    text, details, shown = self._episode(s.episode, j + 1, opts.cache_dir, streams)
                    tool_media += shown
                responses.append({"text": text, "offline": s.offline, "reward": reward, "advantage": per_seq[i],
                                  "tokens": len(s.response), **({"details": details} if details else {})})  # fmt: skip
            out.append(
                group_record(
                    engine="local",
                    uid=prompt.uid,
                    row_id=prompt.row_id,
                    task=prompt.kind,
                    data_source=str((row or {}).get("data_source") or ""),
                    problem_type=prompt.problem_type,
                    messages=messages,
                    ground_truth=prompt.ground_truth,
                    media=media_records(messages, opts.cache_dir, vspec, ispec) + tool_media,
                    responses=responses,
                    max_chars=self.writer.config.max_chars,
                    extras=prompt.extras,
                )
            )
        return out

    def _episode(
        self, episode: Any, number: int, cache_dir: str | None, streams: dict[str, Any]
    ) -> tuple[str, dict[str, str], list[dict[str, Any]]]:
        """An agent episode's transcript (each model turn as written, its calls, the returned frames' times), its
        tool counts, and the media records of the frames its calls returned."""
        from evr1_cache.tools import episode_transcript

        record = episode.record()
        said = [s for s in episode.segments if s.trained]
        for turn, segment in zip(record["turns"], said, strict=False):
            turn["said"] = self.trainer.tokenizer.decode(segment.ids, skip_special_tokens=True)
        stats = record.get("stats") or {}
        details = {"tool calls": str(stats.get("calls", 0)), "served": str(stats.get("served", 0))}
        video = str(episode.session.video)
        return episode_transcript(record), details, tool_media_records(record, video, cache_dir, streams,
                                                                        f"response {number}")  # fmt: skip


def attach_local(trainer: Any, cfg: Any, output_dir: str | os.PathLike[str]) -> RolloutDumpWriter | None:
    """Set `trainer.on_rollout` when `evr1.rollout_dump.enable`; call after a resume (it drops later dumps)."""
    config = dump_config(cfg)
    if not config.enable:
        return None
    writer = _writer(config, Path(output_dir) / "rollouts", trainer.data_opts, "local")
    writer.start(int(trainer.state.step) + 1)
    trainer.on_rollout = LocalDumpHook(trainer, writer)
    return writer


def finish_local(writer: RolloutDumpWriter | None, output_dir: str | os.PathLike[str]) -> Path | None:
    """End of a local run: build the viewer (`write_viewer`) or say how to; returns the viewer's index page."""
    if writer is None:
        return None
    if not writer.config.write_viewer:
        print(f"[evr1] rollout dumps: {writer.folder}  (browse: evr1-train view {output_dir})", flush=True)
        return None
    try:
        from evr1_train.rollouts.view import build_viewer

        index = build_viewer([Path(output_dir)], Path(output_dir) / "viewer", rollouts=[writer.folder])
    except Exception as exc:  # the run is finished and saved; the viewer can be built later
        logger.warning("rollout viewer not built (%s: %s); run `evr1-train view %s`", type(exc).__name__, exc,
                       output_dir)  # fmt: skip
        return None
    print(f"[evr1] rollout viewer: {index.resolve()}", flush=True)
    return index


# -- verl (V1 trainer) -----------------------------------------------------------------------------------------------
_FIELDS = ["uid", "responses", "advantages", "extra_fields", "raw_prompt", "reward_model", "data_source", "extra_info"]
_CORE_FIELDS = ["uid", "responses", "advantages", "extra_fields", "raw_prompt"]


def _verl_writer(trainer: Any, step: int) -> RolloutDumpWriter | None:
    cached: RolloutDumpWriter | bool | None = getattr(trainer, "_evr1_rollout_dump", False)
    if cached is not False:
        return cached if isinstance(cached, RolloutDumpWriter) else None
    writer: RolloutDumpWriter | None = None
    try:
        config = dump_config(trainer.config)
        if config.enable:
            from evr1_train.data.options import DataOptions, data_folder
            from evr1_train.engine.config import _get, plain

            base = data_folder(plain(_get(trainer.config, "data.train_files")))
            opts = DataOptions.from_mapping(plain(_get(trainer.config, "data.evr1")), base_dir=base)
            out = Path(str(_get(trainer.config, "trainer.default_local_dir", "checkpoints"))) / "rollouts"
            writer = _writer(config, out, opts, "verl")
            writer.start(step)
            writer.opts = opts
    except Exception as exc:
        logger.warning("rollout dump disabled: %s: %s", type(exc).__name__, exc)
        writer = None
    trainer._evr1_rollout_dump = writer
    return writer


def maybe_dump_verl(trainer: Any, batch: Any, step: int) -> None:
    """Dump `batch` (a TransferQueue `KVBatchMeta` of the V1 trainer) when `step` is due; never raises."""
    writer = _verl_writer(trainer, step)
    if writer is None or not writer.config.due(step):
        return
    try:
        import transfer_queue as tq

        try:
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=_FIELDS)
        except Exception:  # a backend without the row's optional fields
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=_CORE_FIELDS)
        writer.write_step(step, verl_groups(data, trainer.tokenizer, writer))
    except Exception as exc:
        logger.warning("rollout dump of step %d failed (%s: %s); training goes on", step, type(exc).__name__, exc)


def _column(data: Any, name: str, n: int) -> list[Any]:
    try:
        value = data[name]
    except (KeyError, AttributeError):
        return [None] * n
    if hasattr(value, "unbind"):
        return list(value.unbind(0))
    return list(value.tolist() if hasattr(value, "tolist") else value)


def verl_groups(data: Any, tokenizer: Any, writer: RolloutDumpWriter) -> list[dict[str, Any]]:
    """verl per-sample fields -> one record per prompt group (uid), responses in slot order."""
    uids = [str(u) for u in _column(data, "uid", 0)]
    n = len(uids)
    # every field after "uid", in `_FIELDS` order (a field the backend did not return: None per sample)
    responses, advantages, extra_fields, prompts, reward_model, sources, infos = (
        _column(data, name, n) for name in _FIELDS[1:]
    )
    opts = writer.opts
    if opts is None:
        raise ValueError("rollout dump: the writer has no data options (the verl hook sets them when it starts it)")
    vspec, ispec = opts.video_spec(), opts.image_spec()
    by_uid: dict[str, list[int]] = defaultdict(list)
    for i, uid in enumerate(uids):
        by_uid[uid].append(i)
    out = []
    for uid, idx in by_uid.items():
        first = idx[0]
        messages = list(prompts[first] or [])
        info = infos[first] if isinstance(infos[first], dict) else {}
        rm = reward_model[first] if isinstance(reward_model[first], dict) else {}
        items = []
        for i in idx:
            ids = responses[i]
            ids = ids.tolist() if hasattr(ids, "tolist") else list(ids or [])
            ef = extra_fields[i] if isinstance(extra_fields[i], dict) else {}
            raw_info = ef.get("reward_extra_info")
            rinfo: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
            adv = advantages[i]
            adv_value = float(adv.float().mean()) if hasattr(adv, "float") and adv.numel() else None
            reward = {"overall": rinfo.get("score"), **{k: v for k, v in rinfo.items() if k != "score"}}
            details = {"hybrid": str(ef["evr1_hybrid_reason"])} if ef.get("evr1_hybrid_reason") else {}
            items.append({"text": tokenizer.decode(ids, skip_special_tokens=True), "offline": bool(ef.get("evr1_offline", 0)),
                          "reward": reward, "advantage": adv_value, "tokens": len(ids), "details": details})  # fmt: skip
        ptype = str(info.get("problem_type") or "")
        index = info.get("index")  # the row's 0-based position (`row_extra_info`)
        out.append(
            group_record(
                engine="verl",
                uid=uid,
                row_id=name_row(info, index + 1 if isinstance(index, int) else None),
                task=str(info.get("kind") or sources[first] or ptype),
                data_source=str(sources[first] or ""),
                problem_type=ptype,
                messages=messages,
                ground_truth=rm.get("ground_truth"),
                media=media_records(messages, opts.cache_dir, vspec, ispec),
                responses=items,
                max_chars=writer.config.max_chars,
                extras=info,
            )
        )
    return out
