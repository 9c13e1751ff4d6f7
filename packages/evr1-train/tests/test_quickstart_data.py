"""The quickstart dataset: deterministic scenes whose stored answers are right (checked on the decoded pixels)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from evr1_train.quickstart.dataset import QuickstartDataSpec, answer_text, generate_quickstart_data, iter_scenes
from evr1_train.quickstart.shapes import (
    AGENT_MIX,
    COLOURS,
    DIRECTIONS,
    KINDS,
    LETTERS,
    TASK_MIX,
    make_scene,
    sample_kinds,
)

SPEC = QuickstartDataSpec(n_train=20, n_heldout=10, seed=7)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("qs_data")
    files = generate_quickstart_data(root, SPEC, progress=False)
    rows = {s: [json.loads(x) for x in p.read_text().splitlines()] for s, p in files.items()}
    return {"root": root, "files": files, "rows": rows}


def _decode(path) -> np.ndarray:
    import av

    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _nearest_colour(pixel: np.ndarray) -> str:
    return min(COLOURS, key=lambda c: float(np.abs(np.asarray(COLOURS[c], float) - pixel).sum()))


def _shape_mask(frame: np.ndarray) -> np.ndarray:
    return frame.astype(int).sum(-1) > 200  # background is (16, 16, 16)


def test_kinds_follow_the_mix_exactly_and_splits_differ() -> None:
    kinds = sample_kinds(20, random.Random(0))
    assert sorted(set(kinds)) == sorted(TASK_MIX)  # every kind of the default mix (the agent's flash is its own)
    assert set(TASK_MIX) | set(AGENT_MIX) == set(KINDS)
    assert kinds.count("colour") == 5
    assert kinds.count("when") == 3
    train = [s.frames().tobytes() for _, s in iter_scenes(SPEC, "train")]
    held = [s.frames().tobytes() for _, s in iter_scenes(SPEC, "heldout")]
    assert not set(train) & set(held)
    assert train == [s.frames().tobytes() for _, s in iter_scenes(SPEC, "train")]  # deterministic
    with pytest.raises(KeyError, match="known"):
        make_scene("colur", random.Random(0))


def test_rows_have_the_easyvideor1_schema(data: dict) -> None:
    rows = data["rows"]
    assert len(rows["train"]) == 20
    assert len(rows["heldout"]) == 10
    for row in rows["train"]:
        assert row["has_offline_trajectory"]
        assert row["offline_output"].startswith("<answer>")
        media = row["videos"] or row["images"]
        assert len(media) == 1
        assert (data["root"] / media[0]).exists()
        assert row["problem"].startswith("<video>" if row["videos"] else "<image>")
    assert not any(r["has_offline_trajectory"] for r in rows["heldout"])  # held-out answers are never shown


def test_stored_answers_match_the_pixels(data: dict) -> None:
    """Decode every clip/image and check its answer from the pixels: the task is learnable only if it is right."""
    from PIL import Image

    for row in data["rows"]["train"] + data["rows"]["heldout"]:
        media = data["root"] / (row["videos"] or row["images"])[0]
        frames = _decode(media) if row["videos"] else np.asarray(Image.open(media).convert("RGB"))[None]
        kind, answer = row["kind"], row["answer"]
        if kind in ("colour", "image_colour"):
            mask = _shape_mask(frames[0])
            colour = _nearest_colour(frames[0][mask].mean(0))
            assert LETTERS[list(COLOURS).index(colour)] == answer, row["problem_id"]
        elif kind == "direction":
            c0 = np.argwhere(_shape_mask(frames[0])).mean(0)
            c1 = np.argwhere(_shape_mask(frames[-1])).mean(0)
            dy, dx = c1 - c0
            got = ("right" if dx > 0 else "left") if abs(dx) > abs(dy) else ("down" if dy > 0 else "up")
            assert LETTERS[list(DIRECTIONS).index(got)] == answer, row["problem_id"]
        elif kind == "count":
            mask, h, w = _shape_mask(frames[0]), frames.shape[1], frames.shape[2]
            n = sum(bool(mask[(2 * r + 1) * h // 4, (2 * c + 1) * w // 4]) for r in range(2) for c in range(2))
            assert str(n) == answer, row["problem_id"]
        else:  # when: the square is visible exactly in [start, end) seconds
            start, end = json.loads(answer)["time"]
            visible = [bool(_shape_mask(f).any()) for f in frames]
            fps = 8.0
            expect = [start <= i / fps < end for i in range(len(frames))]
            assert visible == expect, row["problem_id"]


def test_stored_answers_score_full_reward(data: dict) -> None:
    """Offline trajectories are correct and well formed under evr1-rewards (the same scorer training uses)."""
    from evr1_rewards import RewardInput, RewardRouter

    router = RewardRouter()
    for row in data["rows"]["train"]:
        res = router.score(
            RewardInput(
                response=row["offline_output"],
                ground_truth=row["answer"],
                problem_type=row["problem_type"],
                extras={"options": row["options"]},
            )
        )
        assert (res.accuracy, res.format) == (1.0, 1.0), (row["problem_id"], res)
        wrong = router.score(
            RewardInput(
                response="<answer>Z</answer>",
                ground_truth=row["answer"],
                problem_type=row["problem_type"],
                extras={"options": row["options"]},
            )
        )
        assert wrong.accuracy == 0.0


def test_regeneration_resumes_and_refuses_other_settings(data: dict) -> None:
    before = {p: p.stat().st_mtime_ns for p in (data["root"] / "media").iterdir()}
    generate_quickstart_data(data["root"], SPEC, progress=False)  # finished: nothing is rewritten
    assert {p: p.stat().st_mtime_ns for p in (data["root"] / "media").iterdir()} == before
    with pytest.raises(ValueError, match="other settings"):
        generate_quickstart_data(data["root"], QuickstartDataSpec(n_train=21, n_heldout=10, seed=7), progress=False)


def test_the_same_spec_gives_the_same_bytes(tmp_path) -> None:
    """ "Same spec and seed, byte-identical pixels": 4 of 308 clips differed between two runs before the encoder was
    made reproducible (`evr1_cache.write_video`), so two users' quickstarts trained on different pixels."""
    spec = QuickstartDataSpec(n_train=120, n_heldout=24, seed=11)
    media = []
    for run in ("a", "b"):
        generate_quickstart_data(tmp_path / run, spec, progress=False)
        media.append({p.name: p.read_bytes() for p in sorted((tmp_path / run / "media").iterdir())})
    assert len(media[0]) == spec.n_train + spec.n_heldout
    assert media[0] == media[1]


def test_answer_text_uses_the_answer_tags() -> None:
    """The stored answer, rebuilt from the scene itself (its visible span in seconds, its option letter)."""
    scene = make_scene("when", random.Random(3))
    (shape,) = scene.shapes
    start, end = int(shape.visible[0]), int(shape.visible[1])
    assert end - start == 2
    assert answer_text(scene) == f'<answer>{{"time": [{start}, {end}]}}</answer>'
    colour = make_scene("colour", random.Random(3))
    letter = LETTERS[list(COLOURS).index(colour.shapes[0].colour)]
    assert answer_text(colour) == f"<answer>{letter}</answer>"
