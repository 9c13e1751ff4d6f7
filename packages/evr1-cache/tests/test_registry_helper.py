"""The workspace's one registry helper: taken names refused, unknown names answered with the close ones."""

from __future__ import annotations

import dataclasses

import pytest

from evr1_cache.registry import (
    check_fields,
    close_names,
    did_you_mean,
    lookup,
    register_unique,
    registering,
    unknown_name,
)


def test_a_taken_name_is_refused_and_the_table_keeps_the_first() -> None:
    table: dict[str, int] = {}
    assert register_unique(table, "pyav", 1, "decoder") == 1
    with pytest.raises(ValueError, match="decoder 'pyav' is already registered"):
        register_unique(table, "pyav", 2, "decoder")
    deco = registering(table, "ffmpeg", "decoder")
    assert deco(3) == 3
    with pytest.raises(ValueError, match="'ffmpeg' is already registered"):
        registering(table, "ffmpeg", "decoder")(4)
    assert table == {"pyav": 1, "ffmpeg": 3}


def test_an_unknown_name_suggests_the_close_ones_and_lists_the_known() -> None:
    table = {"qwen3_vl": "a", "qwen2_5_vl": "b", "glm4v": "c"}
    with pytest.raises(KeyError) as info:
        lookup(table, "qwen3vl", "model family")
    message = info.value.args[0]
    assert message.startswith("unknown model family 'qwen3vl'; did you mean 'qwen3_vl'")
    assert message.endswith("(known: glm4v, qwen2_5_vl, qwen3_vl)")
    assert unknown_name("decoder", "zzz", ["pyav"]) == "unknown decoder 'zzz'; (known: pyav)"


def test_aliases_resolve_and_are_suggested_too() -> None:
    table = {"video_holmes": 1}
    aliases = {"holmes": "video_holmes"}
    assert lookup(table, " holmes ", "benchmark", aliases=aliases) == 1
    with pytest.raises(KeyError, match="did you mean 'holmes'"):
        lookup(table, "holmez", "benchmark", aliases=aliases, fix="`evr1-eval list` shows them all")
    with pytest.raises(KeyError, match=r"\(`evr1-eval list` shows them all\)"):
        lookup(table, "nothing-like-it", "benchmark", fix="`evr1-eval list` shows them all")


def test_close_names_respect_the_cutoff_and_the_count() -> None:
    known = ["alpha", "alpine", "beta"]
    assert close_names("alpah", known, n=1) == ["alpha"]
    assert close_names("alp", known, cutoff=0.99) == []
    assert did_you_mean("bta", known) == "did you mean 'beta'?"
    assert did_you_mean("xyz", known) == ""


def test_settings_refuse_keys_that_are_not_fields() -> None:
    @dataclasses.dataclass
    class Budget:
        max_frames: int = 4
        max_pixels: int = 64

    check_fields("budget", {"max_frames": 8}, Budget)  # known keys pass
    check_fields("budget", {}, Budget())  # an instance names its fields too
    with pytest.raises(ValueError) as info:
        check_fields("budget", {"max_frame": 8, "zzz": 1}, Budget)
    assert str(info.value) == (
        "unknown budget keys ['max_frame', 'zzz'] (did you mean 'max_frames'?); known: max_frames, max_pixels"
    )
    with pytest.raises(ValueError, match=r"^unknown budget keys \['zzz'\]; known: max_frames, max_pixels$"):
        check_fields("budget", {"zzz": 1}, Budget)
