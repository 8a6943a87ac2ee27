"""Reading lorebooks (``domain.lorebook``): the sample files, each format, and malformed input."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest

from canon_ledger.domain.lorebook import PNG, LorebookError, read, slug

from tests.shared_data import LOREBOOKS as SAMPLES


def test_the_sample_world_info_file() -> None:
    book = read((SAMPLES / "sillytavern-world-info-eldoria.json").read_bytes())
    assert book.format == "sillytavern" and len(book.enabled) == 4 and book.disabled == []
    eldoria = book.entries[0]
    assert eldoria.keys == ["eldoria", "wood", "forest", "magical forest"] and eldoria.name == "eldoria"
    assert eldoria.text.startswith('{{user}}: "What is Eldoria?"')
    raw = json.loads((SAMPLES / "sillytavern-world-info-eldoria.json").read_text())["entries"]["0"]
    assert eldoria.source == {k: v for k, v in raw.items() if k != "content"}  # every other field, whole


def test_the_sample_card_s_character_book() -> None:
    book = read((SAMPLES / "sillytavern-card-seraphina.png").read_bytes())
    assert book.format == "chara_card_v2" and len(book.enabled) == 4
    assert {e.name for e in book.entries} == {"eldoria", "shadowfang", "glade", "power"}
    assert all("insertion_order" in e.source and "content" not in e.source for e in book.entries)


def _card(spec: str) -> dict:
    return {"spec": spec, "data": {"name": "Ilse", "character_book": {"entries": [
        {"id": 7, "keys": ["lamp", "lamps"], "content": "Lamps are lit at dusk.", "enabled": True, "name": "Lamps"},
        {"id": 8, "keys": ["ghost"], "content": "Off.", "enabled": False}]}}}


def _png(chunk: str, payload: dict, kind: bytes = b"tEXt") -> bytes:
    text = base64.b64encode(json.dumps(payload).encode())
    body = chunk.encode() + b"\0" + (b"\0" + zlib.compress(text) if kind == b"zTXt" else text)
    return PNG + struct.pack(">I4s", len(body), kind) + body + b"\0\0\0\0" + struct.pack(">I4s", 0, b"IEND") + b"\0" * 4


@pytest.mark.parametrize("spec", ["chara_card_v2", "chara_card_v3"])
def test_cards_as_json_and_png(spec: str) -> None:
    for data in (json.dumps(_card(spec)).encode(), _png("ccv3" if spec.endswith("v3") else "chara", _card(spec)),
                 _png("chara", _card(spec), b"zTXt")):
        book = read(data)
        assert book.format == spec and [e.name for e in book.enabled] == ["Lamps"]
        assert [e.name for e in book.disabled] == ["ghost"]


def test_lorebook_v3_and_novelai() -> None:
    v3 = read(json.dumps({"spec": "lorebook_v3", "data": _card("x")["data"]["character_book"]}).encode())
    assert v3.format == "lorebook_v3" and len(v3.entries) == 2
    nai = read(json.dumps({"lorebookVersion": 5, "entries": [
        {"id": "a1", "displayName": "Saltmarsh", "keys": ["Saltmarsh"], "text": "A harbour town.", "enabled": True,
         "contextConfig": {"budgetPriority": 400}}]}).encode())
    assert nai.format == "novelai" and nai.entries[0].text == "A harbour town."
    assert nai.entries[0].source["contextConfig"] == {"budgetPriority": 400}


@pytest.mark.parametrize("data, code", [
    (b"not json", "malformed_lorebook"),
    (b"[1, 2]", "unknown_lorebook_format"),
    (b'{"name": "x"}', "unknown_lorebook_format"),
    (b'{"entries": {"0": "a string"}}', "malformed_lorebook"),
    (b'{"entries": {"0": {"key": 5, "content": "x"}}}', "malformed_lorebook"),
    (b'{"spec": "chara_card_v2", "data": {"name": "x"}}', "no_character_book"),
    (PNG + b"\0\0\0\x05IHDR", "malformed_lorebook"),
    (PNG + struct.pack(">I4s", 0, b"IEND") + b"\0" * 4, "unknown_lorebook_format"),
])
def test_what_is_not_a_lorebook_is_named(data: bytes, code: str) -> None:
    with pytest.raises(LorebookError) as e:
        read(data)
    assert e.value.code == code


def test_slugs() -> None:
    assert slug("Magical Forest!") == "magical-forest" and slug("Pávlovna") == "pávlovna" and slug("***") == "entry"
