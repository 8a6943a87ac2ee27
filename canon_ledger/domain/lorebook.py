"""Lorebooks as other tools write them, read into one shape (pure).

Formats: SillyTavern world info (``{"entries": {uid: {key, keysecondary, comment, content,
disable, ...}}}``), a CCv3 lorebook (``{"spec": "lorebook_v3", "data": {"entries": [...]}}``), a
character card (``chara_card_v2`` / ``chara_card_v3``, as JSON or inside a PNG's ``chara`` /
``ccv3`` text chunk: its ``data.character_book``) and a NovelAI ``.lorebook``
(``{"lorebookVersion": n, "entries": [{text, keys, displayName, enabled, ...}]}``).

Invariant: nothing of an entry is dropped. ``LoreEntry.source`` is the entry as the file holds
it, minus its content (which is ``text``), so an export can write it back as it came.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

PNG = b"\x89PNG\r\n\x1a\n"
CARD_CHUNKS = ("ccv3", "chara")  # the CCv3 chunk wins when a card carries both
FORMATS = ("sillytavern", "lorebook_v3", "chara_card_v2", "chara_card_v3", "novelai")


class LorebookError(ValueError):
    """The file is no lorebook this reader knows, or is malformed; ``code`` names the problem."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class LoreEntry:
    uid: str  # the entry's id in its file
    name: str
    keys: list[str]
    text: str
    enabled: bool
    source: dict[str, Any] = field(default_factory=dict)  # the entry as written, without its content


@dataclass(frozen=True)
class Lorebook:
    format: str
    name: str
    entries: list[LoreEntry]

    @property
    def enabled(self) -> list[LoreEntry]:
        return [e for e in self.entries if e.enabled]

    @property
    def disabled(self) -> list[LoreEntry]:
        return [e for e in self.entries if not e.enabled]


def read(data: bytes) -> Lorebook:
    """The lorebook in ``data`` (a JSON file's bytes or a PNG card), or ``LorebookError``."""
    if data.startswith(PNG):
        return _from_json(_card_from_png(data))
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LorebookError("malformed_lorebook", f"not JSON (nor a PNG card): {e}") from None
    return _from_json(doc)


def _from_json(doc: Any) -> Lorebook:
    if not isinstance(doc, dict):
        raise LorebookError("unknown_lorebook_format", "the file holds no JSON object")
    spec = doc.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        data = _object(doc.get("data"), "data")
        book = data.get("character_book")
        if book is None:
            raise LorebookError("no_character_book", "the character card has no data.character_book")
        book = _object(book, "data.character_book")
        return Lorebook(spec, str(book.get("name") or data.get("name") or ""), _ccv3_entries(book, spec))
    if spec == "lorebook_v3":
        book = _object(doc.get("data"), "data")
        return Lorebook(spec, str(book.get("name") or ""), _ccv3_entries(book, spec))
    if "lorebookVersion" in doc:
        entries = _list(doc.get("entries"), "entries")
        return Lorebook("novelai", str(doc.get("name") or ""), [_novelai(e, i) for i, e in enumerate(entries)])
    if isinstance(doc.get("entries"), dict):
        items = doc["entries"]
        return Lorebook("sillytavern", str(doc.get("name") or ""),
                        [_sillytavern(_object(e, f"entries.{uid}"), str(uid)) for uid, e in items.items()])
    raise LorebookError("unknown_lorebook_format", "not SillyTavern world info, a CCv3 lorebook, a character card "
                        "or a NovelAI lorebook (no `entries` object, `spec` or `lorebookVersion`)")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LorebookError("malformed_lorebook", f"{where} is not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise LorebookError("malformed_lorebook", f"{where} is not a list")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [k.strip() for k in value.split(",") if k.strip()]
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise LorebookError("malformed_lorebook", f"{where} is not a list of strings")
    return [k for k in value if k.strip()]


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise LorebookError("malformed_lorebook", f"{where} is not a string")
    return value


def _entry(uid: str, name: Any, keys: list[str], text: str, enabled: bool, entry: dict[str, Any],
           content_key: str) -> LoreEntry:
    named = _text(name, f"entry {uid}: name").strip() or (keys[0] if keys else f"entry {uid}")
    return LoreEntry(uid, named, keys, text, enabled, {k: v for k, v in entry.items() if k != content_key})


def _sillytavern(e: dict[str, Any], uid: str) -> LoreEntry:
    keys = _strings(e.get("key"), f"entries.{uid}.key")
    return _entry(str(e.get("uid", uid)), e.get("comment"), keys, _text(e.get("content"), f"entries.{uid}.content"),
                  not bool(e.get("disable", False)), e, "content")


def _ccv3_entries(book: dict[str, Any], spec: str) -> list[LoreEntry]:
    return [_ccv3(raw, i) for i, raw in enumerate(_list(book.get("entries"), f"{spec} entries"))]


def _ccv3(raw: Any, i: int) -> LoreEntry:
    e = _object(raw, f"entries[{i}]")
    keys = _strings(e.get("keys"), f"entries[{i}].keys")
    return _entry(str(e.get("id", i)), e.get("name") or e.get("comment"), keys,
                  _text(e.get("content"), f"entries[{i}].content"), bool(e.get("enabled", True)), e, "content")


def _novelai(raw: Any, i: int) -> LoreEntry:
    e = _object(raw, f"entries[{i}]")
    keys = _strings(e.get("keys"), f"entries[{i}].keys")
    return _entry(str(e.get("id", i)), e.get("displayName"), keys, _text(e.get("text"), f"entries[{i}].text"),
                  bool(e.get("enabled", True)), e, "text")


def read_entry(fmt: str, raw: Any) -> LoreEntry:
    """One entry of a ``fmt`` lorebook (one of ``FORMATS``), read as ``read`` reads it in its
    file: its name, keys, text and whether it is enabled (``LorebookError`` if malformed)."""
    if fmt == "sillytavern":
        return _sillytavern(_object(raw, "the entry"), "0")
    if fmt == "novelai":
        return _novelai(raw, 0)
    if fmt in FORMATS:
        return _ccv3(raw, 0)
    raise LorebookError("unknown_lorebook_format", f"{fmt!r} is not one of {', '.join(FORMATS)}")


def _card_from_png(data: bytes) -> Any:
    chunks: dict[str, bytes] = {}
    i = len(PNG)
    while i + 8 <= len(data):
        (length, kind) = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + length]
        if len(body) != length:
            raise LorebookError("malformed_lorebook", "the PNG is truncated")
        i += 12 + length
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword, text = _png_text(kind, body)
            chunks.setdefault(keyword, text)
        if kind == b"IEND":
            break
    for name in CARD_CHUNKS:
        if name in chunks:
            try:
                return json.loads(base64.b64decode(chunks[name], validate=False).decode("utf-8"))
            except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise LorebookError("malformed_lorebook", f"the PNG's {name!r} chunk is not base64 JSON: {e}") from None
    raise LorebookError("unknown_lorebook_format", "a PNG without a `chara` or `ccv3` text chunk (not a character card)")


def _png_text(kind: bytes, body: bytes) -> tuple[str, bytes]:
    keyword, _, rest = body.partition(b"\0")
    name = keyword.decode("latin-1")
    try:
        if kind == b"zTXt":
            return name, zlib.decompress(rest[1:])
        if kind == b"iTXt":
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")  # language
            _, _, text = rest.partition(b"\0")  # translated keyword
            return name, zlib.decompress(text) if compressed else text
    except zlib.error as e:
        raise LorebookError("malformed_lorebook", f"the PNG's {name!r} chunk does not decompress: {e}") from None
    return name, rest


def slug(text: str) -> str:
    """A canon key from a name: its letters and digits, casefolded, joined by ``-`` (``entry`` if none)."""
    return re.sub(r"[\W_]+", "-", text.casefold()).strip("-")[:80] or "entry"
