"""The prompt record: a JSON round trip, a hash that follows the content (text, media order, system turn), messages
in the content-part format, and stored records that are malformed or edited refused with a clear error."""

from __future__ import annotations

import hashlib
import json

import pytest

from evr1_cache import PromptRecord, PromptRecordError

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "video", "video": "/data/a.mp4"}, {"type": "text", "text": "Which "},
                                 {"type": "image", "image": {"bytes": b"png"}}, {"type": "text", "text": "one?"}]},
]  # fmt: skip


def test_messages_become_parts_in_order() -> None:
    rec = PromptRecord.from_messages(MESSAGES)
    png = "bytes:" + hashlib.sha256(b"png").hexdigest()
    assert rec.parts == (("video", "/data/a.mp4"), ("text", "Which "), ("image", png), ("text", "one?"))
    assert rec.system == "Be brief."
    assert rec.text == "<video>Which <image>one?"
    assert rec.media == (("video", "/data/a.mp4"), ("image", png))


def test_json_round_trip_and_a_hash_that_follows_the_content() -> None:
    rec = PromptRecord.from_messages(MESSAGES)
    stored = json.loads(json.dumps(rec.to_dict()))
    assert PromptRecord.from_dict(stored) == rec
    assert len(rec.hash) == 64
    swapped = PromptRecord((rec.parts[1], rec.parts[0], *rec.parts[2:]), rec.system)  # the parts in another order
    others = {swapped.hash, PromptRecord(rec.parts).hash, PromptRecord(rec.parts[:-1], rec.system).hash}
    assert rec.hash not in others
    assert len(others) == 3


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["parts"][1].__setitem__(1, "Which two "), "does not hash to what the model was sent"),
        (lambda d: d.__setitem__("system", "Be long."), "does not hash to what the model was sent"),
        (lambda d: d.__setitem__("schema", "other/1"), "schema"),
        (lambda d: d.__setitem__("parts", "text"), r"list of \[kind, value\] pairs"),
        (lambda d: d["parts"][0].__setitem__(0, "audio"), "unknown kind"),
    ],
)
def test_a_stored_record_that_was_edited_or_is_malformed_is_refused(edit, message: str) -> None:
    data = PromptRecord.from_messages(MESSAGES).to_dict()
    edit(data)
    with pytest.raises(PromptRecordError, match=message):
        PromptRecord.from_dict(data)


def test_a_medium_without_a_source_is_named_by_position() -> None:
    rec = PromptRecord.from_messages([{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "video"}]}])
    assert rec.parts == (("text", "x"), ("video", "video#1"))
    with pytest.raises(PromptRecordError, match="type 'audio'"):
        PromptRecord.from_messages([{"role": "user", "content": [{"type": "audio"}]}])
