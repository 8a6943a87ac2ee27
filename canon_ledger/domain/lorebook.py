"""Lorebooks as other tools write them, read into one shape (pure).

Formats: SillyTavern world info (``{"entries": {uid: {key, keysecondary, comment, content,
disable, ...}}}``), a CCv3 lorebook (``{"spec": "lorebook_v3", "data": {"entries": [...]}}``), a
character card (``chara_card_v2`` / ``chara_card_v3``, as JSON or inside a PNG's ``chara`` /
``ccv3`` text chunk: its ``data.character_book``), a NovelAI ``.lorebook``
(``{"lorebookVersion": n, "entries": [{text, keys, displayName, enabled, ...}]}``, or the
``lorebook`` inside a NovelAI ``.story`` container: ``{"storyContainerVersion": n, "content":
{"lorebook": {...}}}``) and a RisuAI lorebook export (``{"type": "risu", "ver": 1, "data":
[{key, secondkey, comment, content, alwaysActive, selective, insertorder, mode, ...}]}``: its
keys are comma-separated strings; a ``mode: "folder"`` item is a folder of the editor, not an
entry; content is kept as written, ``{{char}}`` templates and ``@@`` decorators included).

A world info whose ``entries`` is a list (as SillyTavern reads it since its PR #5921) is a
character book without its card: read as ``lorebook_v3`` when its entries have the CCv3 spec's
names (``keys``, ``content``, ``insertion_order``, ...), as ``sillytavern`` when they have
SillyTavern's own (``key``, ``keysecondary``, ``uid``, ``order``, ...). Anything else is an
``unknown_lorebook_format`` error that names what the file holds.

Invariant: nothing of an entry is dropped. ``LoreEntry.source`` is the entry as the file holds
it, minus its content (which is ``text``), so an export can write it back as it came. So the
source's budget settings stay where its format writes them (``budget`` reads them back).
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
FORMATS = ("sillytavern", "lorebook_v3", "chara_card_v2", "chara_card_v3", "novelai", "risu")


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
    index: int = 0  # where the file lists it among its entries (0: the first), folders counted


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


# Fields of a RisuAI lorebook item no other format's entry has: RisuAI keeps a character's or
# module's lorebook as a bare list of them (``exportLoreBook`` wraps it in {"type": "risu", ...}).
_RISU_ONLY = ("secondkey", "alwaysActive", "insertorder")
# Where a format this reader does not know keeps an entry's text instead of ``content``.
_OTHER_TEXT = ("entry", "text", "value")


def _from_json(doc: Any) -> Lorebook:
    if isinstance(doc, list) and doc and all(isinstance(v, dict) for v in doc) and all(
            "key" in v and "content" in v for v in doc) and any(k in v for v in doc for k in _RISU_ONLY):
        found = (_risu(e, i) for i, e in enumerate(doc))  # a RisuAI lorebook as Risu saves it: a bare list
        return Lorebook("risu", "", [e for e in found if e is not None])
    if not isinstance(doc, dict):
        entries = isinstance(doc, list) and doc and all(isinstance(v, dict) for v in doc)
        hint = ("; a list of entries needs its book around it, as in {\"entries\": [...]}"
                if entries and _content_elsewhere(doc) is None else "")
        raise LorebookError("unknown_lorebook_format", f"the file holds {_holds(doc)}, not a lorebook (a JSON object)"
                            + hint + _elsewhere_hint(doc if entries else []))
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
    if doc.get("type") == "risu" and isinstance(doc.get("data"), list):
        found = (_risu(e, i) for i, e in enumerate(doc["data"]))
        return Lorebook("risu", str(doc.get("name") or ""), [e for e in found if e is not None])
    story = _novelai_container(doc)
    if story is not None:
        title, where, book = story
        entries = _list(book.get("entries", []), f"{where}.entries")
        return Lorebook("novelai", title, [_novelai(e, i) for i, e in enumerate(entries)])
    if isinstance(doc.get("entries"), dict):
        items = doc["entries"]
        return Lorebook("sillytavern", str(doc.get("name") or ""),
                        [_sillytavern(_object(e, f"entries.{uid}"), str(uid), i)
                         for i, (uid, e) in enumerate(items.items())])
    if isinstance(doc.get("entries"), list):
        items = doc["entries"]
        if _content_elsewhere(items) is not None:  # its texts would be read as empty: refused, not lost
            raise LorebookError("unknown_lorebook_format", f"the file holds {_holds(doc)}" + _elsewhere_hint(items))
        if _sillytavern_names(items):
            return Lorebook("sillytavern", str(doc.get("name") or ""),
                            [_sillytavern(_object(e, f"entries[{i}]"), str(i), i) for i, e in enumerate(items)])
        return Lorebook("lorebook_v3", str(doc.get("name") or ""), [_ccv3(e, i) for i, e in enumerate(items)])
    raise LorebookError("unknown_lorebook_format", f"the file holds {_holds(doc)}: no lorebook this reader knows "
                        "(SillyTavern world info, a CCv3 lorebook or character card, a NovelAI lorebook, story or "
                        "scenario, a RisuAI lorebook export)")


def _content_elsewhere(entries: list[Any]) -> str | None:
    """The field the entries keep their text in when none has ``content`` (AI Dungeon's world
    info writes ``entry``), or None."""
    objects = [e for e in entries if isinstance(e, dict)]
    if not objects or any("content" in e for e in objects):
        return None
    return next((f for f in _OTHER_TEXT if any(isinstance(e.get(f), str) and e[f].strip() for e in objects)), None)


def _elsewhere_hint(entries: list[Any]) -> str:
    field = _content_elsewhere(entries)
    return ("" if field is None else f"; its entries keep their text in `{field}`, not `content` (AI Dungeon world "
            "info, or another format this reader does not know): not read, so that no entry is imported empty")


def _novelai_container(doc: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """A NovelAI ``.story`` (``content.lorebook``) or ``.scenario`` (``lorebook``): its title, where
    its lorebook is, the lorebook; None for anything else."""
    content = doc.get("content")
    if "storyContainerVersion" in doc and isinstance(content, dict) and isinstance(content.get("lorebook"), dict):
        meta = doc.get("metadata")
        title = meta.get("title") if isinstance(meta, dict) else None
        return str(title or ""), "content.lorebook", content["lorebook"]
    if "scenarioVersion" in doc and isinstance(doc.get("lorebook"), dict):
        return str(doc.get("title") or ""), "lorebook", doc["lorebook"]
    return None


# Fields only SillyTavern's own entries have (a CCv3 entry has ``keys``, ``secondary_keys``, ``insertion_order``).
_SILLYTAVERN_ONLY = ("key", "keysecondary", "uid", "order", "disable", "selectiveLogic")
_CCV3_ONLY = ("keys", "secondary_keys", "insertion_order", "enabled", "use_regex")


def _sillytavern_names(entries: list[Any]) -> bool:
    """Does a list of entries use SillyTavern's own field names (else the CCv3 spec's)?"""
    objects = [e for e in entries if isinstance(e, dict)]
    return any(any(k in e for k in _SILLYTAVERN_ONLY) for e in objects) and not any(
        any(k in e for k in _CCV3_ONLY) for e in objects)


def _holds(doc: Any) -> str:
    """What a JSON document that is no lorebook holds, in a few words."""
    if isinstance(doc, list):
        kinds = sorted({_kind(v)[_kind(v).index(" ") + 1:] for v in doc})
        return f"a JSON list of {len(doc)} item{'s' if len(doc) != 1 else ''}" + (
            f" ({', '.join(kinds)})" if kinds else "")
    if not isinstance(doc, dict):
        return "JSON null" if doc is None else f"a JSON {_kind(doc).split(' ', 1)[1]}"
    if doc.get("type") == "risu":
        return f"a RisuAI export whose `data` is {_kind(doc.get('data'))}, not a list of lorebook entries"
    if "storyContainerVersion" in doc:
        return "a NovelAI story container without a lorebook (`content.lorebook`)"
    if "spec" in doc:
        return f"an object whose `spec` is {json.dumps(doc['spec'], ensure_ascii=False)[:60]}"
    if "entries" in doc:
        return f"an object whose `entries` is {_kind(doc['entries'])}"
    if "worldinfo" in doc:
        return "a KoboldAI story (its `worldinfo` is not read: export the world info as SillyTavern's)"
    if "first_mes" in doc or "char_name" in doc:
        return "a character card without a `spec` (V1 cards carry no lorebook)"
    keys = list(doc)
    shown = ", ".join(json.dumps(k, ensure_ascii=False)[:40] for k in keys[:8])
    return f"an object with keys {shown}{', ...' if len(keys) > 8 else ''}" if keys else "an empty object"


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"


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
           content_key: str, index: int = 0) -> LoreEntry:
    named = _text(name, f"entry {uid}: name").strip() or (keys[0] if keys else f"entry {uid}")
    return LoreEntry(uid, named, keys, text, enabled, {k: v for k, v in entry.items() if k != content_key}, index)


def _sillytavern(e: dict[str, Any], uid: str, index: int = 0) -> LoreEntry:
    keys = _strings(e.get("key"), f"entries.{uid}.key")
    return _entry(str(e.get("uid", uid)), e.get("comment"), keys, _text(e.get("content"), f"entries.{uid}.content"),
                  not bool(e.get("disable", False)), e, "content", index)


def _ccv3_entries(book: dict[str, Any], spec: str) -> list[LoreEntry]:
    return [_ccv3(raw, i) for i, raw in enumerate(_list(book.get("entries"), f"{spec} entries"))]


def _ccv3(raw: Any, i: int) -> LoreEntry:
    e = _object(raw, f"entries[{i}]")
    keys = _strings(e.get("keys"), f"entries[{i}].keys")
    return _entry(str(e.get("id", i)), e.get("name") or e.get("comment"), keys,
                  _text(e.get("content"), f"entries[{i}].content"), bool(e.get("enabled", True)), e, "content", i)


def _novelai(raw: Any, i: int) -> LoreEntry:
    e = _object(raw, f"entries[{i}]")
    keys = _strings(e.get("keys"), f"entries[{i}].keys")
    return _entry(str(e.get("id", i)), e.get("displayName"), keys, _text(e.get("text"), f"entries[{i}].text"),
                  bool(e.get("enabled", True)), e, "text", i)


def _risu(raw: Any, i: int) -> LoreEntry | None:
    """A RisuAI lorebook item (None for a folder). Risu has no disabled entries: every one is
    enabled (one with neither keys nor ``alwaysActive`` never fires there, nor here)."""
    e = _object(raw, f"data[{i}]")
    if e.get("mode") == "folder":
        return None
    keys = _strings(e.get("key"), f"data[{i}].key")
    uid = e.get("id")
    return _entry(str(uid) if isinstance(uid, (str, int)) and uid != "" else str(i), e.get("comment"), keys,
                  _text(e.get("content"), f"data[{i}].content"), True, e, "content", i)


@dataclass(frozen=True)
class Budget:
    """An imported entry's budget settings as its source wrote them: ``order`` (its place among
    the entries a budget keeps, higher first as SillyTavern and RisuAI sort; None if the source
    has none) and ``ignore_budget`` (the source promises it is inserted whatever the budget)."""

    order: float | None
    ignore_budget: bool


def budget(fmt: str, entry: dict[str, Any]) -> Budget:
    """The budget settings of a ``fmt`` entry as ``fields.lorebook.entry`` keeps it: SillyTavern's
    ``order`` and ``ignoreBudget``; a CCv3 book's or card's ``insertion_order`` (else
    ``priority``) and ``extensions.ignore_budget`` (SillyTavern's name for it there); NovelAI's
    ``contextConfig.budgetPriority`` (no ignore-budget flag); RisuAI's ``insertorder`` (none)."""
    def number(value: Any) -> float | None:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    extensions = entry.get("extensions")
    extensions = extensions if isinstance(extensions, dict) else {}
    if fmt == "sillytavern":
        return Budget(number(entry.get("order")), entry.get("ignoreBudget") is True)
    if fmt == "novelai":
        config = entry.get("contextConfig")
        return Budget(number(config.get("budgetPriority")) if isinstance(config, dict) else None, False)
    if fmt == "risu":
        return Budget(number(entry.get("insertorder")), False)
    order = number(entry.get("insertion_order"))
    if order is None:
        order = number(entry.get("priority"))
    return Budget(order, extensions.get("ignore_budget") is True)


def read_entry(fmt: str, raw: Any) -> LoreEntry:
    """One entry of a ``fmt`` lorebook (one of ``FORMATS``), read as ``read`` reads it in its
    file: its name, keys, text and whether it is enabled (``LorebookError`` if malformed)."""
    if fmt == "sillytavern":
        return _sillytavern(_object(raw, "the entry"), "0")
    if fmt == "novelai":
        return _novelai(raw, 0)
    if fmt == "risu":
        entry = _risu(raw, 0)
        if entry is None:
            raise LorebookError("malformed_lorebook", "a RisuAI folder is not an entry")
        return entry
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
