#!/usr/bin/env python
"""Real lorebooks behave like lorebooks: what a writer packet brings of an imported lorebook (issue 41).

    python benchmarks/bench_lorebooks.py [LOREBOOK ...] [--dir DIR] [--trials N] [--large N]
        [--repeat N] [--seed N] [--embedder NAME] [--lore-cap PERCENT] [--note TEXT] [--json]
        [--format markdown|json] [--save-json PATH]

Not part of the pytest run. The lorebooks are real files people published (their licences vary,
so they are not in this repository): pass their paths, or ``--dir`` (default ``/work/lorebooks``,
``$CANON_LOREBOOKS`` when set): every ``.json``, ``.lorebook``, ``.story``, ``.scenario`` and
``.png`` file there. Per lorebook, into a fresh SQLite store (``--embedder``, default
``hashing``, so no model is loaded), as a user would:

1. ``canon import lorebook FILE --story S --confirm --format json --no-index`` (the CLI, in this
   process); an import that fails or refuses entries is reported (the row says so).
2. Scenes: for k in (1, 3), ``--trials`` times each, k random enabled entries that have keys and
   are not always-on (a fixed seed per book) are named in a chapter's text by one of their primary
   keys, written in the book's language (English, Chinese, Japanese or Korean, guessed from its
   entries' scripts). A selective entry also gets a secondary key when its logic needs one
   (``and_any``: one, ``and_all``: all; ``not_any`` / ``not_all``: none). Each scene is its own
   planned chapter: with k = 1 the name is in the chapter goals; with k = 3 the first name is in
   the goals and the others in a scene card's summary.
3. The writer packet of each chapter at the story's default budget (12,000) and at ``--large``
   (default 200,000).

Measured per book (an imported entry is found in a packet by its key, the slug the import gives
it: ``lorebook_import.plan``):

- **recall@default / recall@large**: of the named entries, those in the packet ``included`` or
  ``trimmed`` because the text mentions them (a reason "mentioned ...", or a trimmed item's
  "trimmed ... (mentioned ...)"). Named entries the packet lists ``dropped`` are counted with
  their reasons; named entries it does not list at all are "missing".
- **untriggered@default / @large**: imported entries in the packet (included or trimmed) that are
  not always-on and whose activation rule does not fire on the chapter's text. The rule is checked
  here as SillyTavern checks it (keys case-folded; a key with an ASCII letter or digit as a whole
  word, ASCII-only boundaries; any other key as a substring; ``/regex/flags`` keys; the selective
  logic over the secondary keys), so an entry another name brings in as well ("also triggered")
  is not counted. Goal: 0.
- **always-on kept**: the book's always-on (constant) entries that the packet of the first
  k = 1 chapter holds (included or trimmed), at the default and the large budget; those it lists
  dropped, with their reasons, and those it does not list.
- **selective cases**: for up to 8 selective entries per book, two chapters each: the logic
  satisfied (primary key, plus the secondary keys the logic asks for; expected in the packet by
  mention) and the logic not satisfied (``and_any`` / ``and_all``: the primary key without its
  secondary keys; ``not_any`` / ``not_all``: the primary key with all of them; expected absent from
  the packet), at the large budget. "ok" counts the cases that behaved as the logic says.
- **p50 ms**: the writer packet of the first k = 1 chapter at the default budget, ``--repeat``
  times (default 10) after one warm-up, through ``Services.packet`` as ``canon packet`` calls it.
  A reference store (the same story title, chapter and goals, no lorebook) is measured in the same
  run; the report gives the largest book's p50 against it.

Exit status 1 when a goal is missed on any book: recall below 1.0 at the large budget, or an
untriggered entry in a packet (at either budget), or a book that does not import.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import add_output_options, emit, header, loadavg, log, machine_info, percentiles  # noqa: E402

DEFAULT_DIR = os.environ.get("CANON_LOREBOOKS", "/work/lorebooks")
SUFFIXES = (".json", ".lorebook", ".story", ".scenario", ".png")
LARGE = 200_000
STORY = "lore"
SELECTIVE_CASES = 8  # selective entries tested per book (two chapters each)
# Packet item kinds that are not canon entries (their keys are chapters, scenes, stories, ...).
STRUCTURAL = {"scene_card", "chapter_goals", "style_guardrails", "output_contract", "chapter_ending", "chapter_summary",
              "volume_summary", "chunk", "wiki_page", "history", "draft_under_review", "chapter_text", "role_lists",
              "story", "development_chain"}
_REGEX_KEY = re.compile(r"^/(.+)/([a-z]*)$", re.S)

# Scene sentences in each language: names, joined by the language's list separator.
TEMPLATES = {
    "en": ("This chapter turns to {}.", "The scene follows {}.", ", "),
    "zh": ("本章中，{}成为故事的焦点。", "这一幕围绕{}展开。", "、"),
    "ja": ("この章では、{}が物語の中心となる。", "この場面は{}をめぐって進む。", "、"),
    "ko": ("이번 장에서는 {}가 이야기의 중심이 된다.", "이 장면은 {}를 둘러싸고 전개된다.", ", "),
}


# -- the book's language and a reference matcher ---------------------------------------------------
def script_of(ch: str) -> str | None:
    o = ord(ch)
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "ko"
    if 0x3040 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF or 0xFF66 <= o <= 0xFF9F:
        return "kana"
    if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
        return "han"
    if ch.isascii() and ch.isalpha():
        return "latin"
    return None


def language(texts: list[str]) -> str:
    """en, zh, ja or ko: the script that weighs most in the texts (a Han, kana or Hangul character
    counts as three Latin letters); Han with more than a tenth kana is Japanese."""
    counts = Counter(s for t in texts for s in map(script_of, t) if s)
    cjk = counts["han"] + counts["kana"]
    weights = {"ko": 3 * counts["ko"], "cjk": 3 * cjk, "en": counts["latin"]}
    top = max(weights, key=lambda k: weights[k])
    if top == "cjk":
        return "ja" if counts["kana"] > 0.1 * cjk else "zh"
    return top if weights[top] else "en"


def key_language(key: str) -> str:
    scripts = {s for s in map(script_of, key) if s}
    if "ko" in scripts:
        return "ko"
    if "kana" in scripts:
        return "ja"
    if "han" in scripts:
        return "zh"  # Han alone also fits a Japanese book
    return "en"


def literal(key: str) -> str | None:
    """The text a scene writes to mention ``key``: the key itself, or the pattern of a
    ``/regex/`` key that is a plain string (a CCv3 entry with ``use_regex`` has its keys read
    that way); None for a key no plain text stands for (a real pattern, a ``{{macro}}``)."""
    m = _REGEX_KEY.match(key)
    if m:
        key = m.group(1)
        if re.escape(key) != key.replace(" ", "\\ ") and re.escape(key) != key:
            return None
    if not key.strip() or "{{" in key or "\n" in key:
        return None
    return key


def key_fires(key: str, text: str, case_sensitive: bool, whole_words: bool) -> bool:
    """SillyTavern's test of one key (``matchKeys``): a /regex/; else case-folded, and with whole
    words a key holding an ASCII letter or digit must not touch [A-Za-z0-9_] on either side
    (JavaScript's ASCII ``\\W``); a key without one is a substring."""
    m = _REGEX_KEY.match(key)
    if m:
        flags = 0 if case_sensitive else re.IGNORECASE
        for f in m.group(2):
            flags |= {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE}.get(f, 0)
        try:
            return re.search(m.group(1), text, flags) is not None
        except re.error:
            pass
    k, t = (key, text) if case_sensitive else (key.casefold(), text.casefold())
    if not whole_words or not any(c.isascii() and c.isalnum() for c in k):
        return k in t
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(k) + r"(?![A-Za-z0-9_])", t) is not None


def rule_fires(rule: Any, text: str) -> bool:
    """Does the entry's activation rule fire on ``text`` (always-on entries: always)?"""
    if rule.never:
        return False
    if rule.constant:
        return True
    if not any(key_fires(k, text, rule.case_sensitive, rule.whole_words) for k in rule.keys):
        return False
    found = sum(key_fires(k, text, rule.case_sensitive, rule.whole_words) for k in rule.secondary)
    return bool(rule.selected(found))


# -- scenes ------------------------------------------------------------------------------------------
@dataclass
class Scene:
    chapter: int
    kind: str  # "k1", "k3", "selective+", "selective-"
    named: list[str]  # keys (slugs) of the entries named
    goals: str
    summary: str = ""  # a scene card's summary ("" for none)
    expect: bool = True  # selective cases: is the entry expected in the packet

    @property
    def text(self) -> str:
        return self.goals + "\n" + self.summary


def pick_key(keys: tuple[str, ...], lang: str, rng: random.Random) -> str | None:
    usable = [t for t in map(literal, keys) if t is not None]
    if not usable:
        return None
    own = [k for k in usable if key_language(k) == lang or (lang == "ja" and key_language(k) == "zh")]
    return rng.choice(own or usable)


def sentence(lang: str, names: list[str], second: bool = False) -> str:
    first, other, sep = TEMPLATES[lang]
    return (other if second else first).format(sep.join(names))


def mention(p: Any, lang: str, rng: random.Random) -> str | None:
    """How a scene names entry ``p`` so that its rule fires: a primary key, and the secondary keys
    its logic asks for (None when it has no plain key)."""
    r = p.rule
    key = pick_key(r.keys, lang, rng)
    if key is None:
        return None
    if not r.secondary:
        return key
    plain_secondary = [t for t in map(literal, r.secondary) if t is not None]
    if r.logic == "and_any":
        return f"{key} {rng.choice(plain_secondary)}" if plain_secondary else None
    if r.logic == "and_all":
        return " ".join([key, *plain_secondary]) if len(plain_secondary) == len(r.secondary) else None
    return key  # not_any / not_all: the primary alone


def scenes(planned: list[Any], lang: str, seed: int, trials: int) -> tuple[list[Scene], list[Scene]]:
    """The k-named scenes, and the selective cases."""
    rng = random.Random(seed)
    pool = [p for p in planned if p.status == "import" and not p.rule.constant and not p.rule.never and p.rule.keys]
    out: list[Scene] = []
    chapter = 0
    for k in (1, 3):
        for _ in range(trials):
            if not pool:
                break
            picks: list[tuple[Any, str]] = []
            for p in rng.sample(pool, len(pool)):
                said = mention(p, lang, rng)
                if said is not None and all(said != s for _, s in picks):
                    picks.append((p, said))
                if len(picks) == k:
                    break
            if not picks:
                continue
            chapter += 1
            names = [s for _, s in picks]
            goals = sentence(lang, names[:1])
            summary = sentence(lang, names[1:], second=True) if len(names) > 1 else ""
            out.append(Scene(chapter, f"k{k}", [p.key for p, _ in picks], goals, summary))
    cases: list[Scene] = []
    selective = [p for p in pool if p.rule.secondary]
    for p in rng.sample(selective, min(SELECTIVE_CASES, len(selective))):
        r = p.rule
        key = pick_key(r.keys, lang, rng)
        secondary = [t for t in map(literal, r.secondary) if t is not None]
        if key is None or not secondary:
            continue
        if r.logic in ("and_any", "and_all"):
            met = [key, *(secondary[:1] if r.logic == "and_any" else secondary)]
            unmet = [key]
        else:  # not_any / not_all: every secondary key unmet the logic
            met, unmet = [key], [key, *secondary]
        for expect, words in ((True, met), (False, unmet)):
            chapter += 1
            cases.append(Scene(chapter, "selective+" if expect else "selective-", [p.key],
                               sentence(lang, [" ".join(words)]), expect=expect))
    return out, cases


# -- what the import brings ---------------------------------------------------------------------------
@dataclass
class Planned:
    """An entry of the file as the import brings it: its canon key, its activation rule, and
    whether it is imported ("import", "disabled", "refused")."""

    key: str
    rule: Any
    status: str
    name: str
    text: str


def planned_entries(book: Any, story: str) -> list[Planned]:
    """``lorebook_import.plan`` when the checkout has it; else the same keys and rules derived here
    (a slug of the name, made unique in file order; the rule ``domain.recall`` reads from the
    source's settings), so the benchmark also runs on checkouts from before the dry run."""
    from canon_ledger.application import lorebook_import

    plan = getattr(lorebook_import, "plan", None)
    if plan is not None:
        return [Planned(p.key, p.rule, p.status, p.entry.name, p.entry.text) for p in plan(book, story)]
    from canon_ledger.domain import recall
    from canon_ledger.domain.lorebook import slug

    used: dict[str, int] = {}
    out = []
    for e in book.entries:
        rule = (recall.rule(e.name, e.keys, {"lorebook": {"format": book.format, "entry": e.source}})
                or recall.default_rule(e.name, e.keys))
        if not e.enabled:
            out.append(Planned("", rule, "disabled", e.name, e.text))
            continue
        base = slug(e.name)
        used[base] = used.get(base, 0) + 1
        out.append(Planned(base if used[base] == 1 else f"{base}-{used[base]}", rule, "import", e.name, e.text))
    return out


# -- one book ------------------------------------------------------------------------------------------
def import_cli(url: str, path: Path, story: str) -> tuple[int, list[dict[str, Any]], str]:
    """``canon import lorebook`` in this process: its exit status, its JSON lines, its stderr."""
    from canon_ledger.infrastructure import cli

    out, err = io.StringIO(), io.StringIO()
    argv = ["import", "lorebook", str(path), "--db", url, "--story", story, "--title", path.stem, "--confirm",
            "--format", "json", *(["--no-index"] if has_no_index() else [])]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as e:
            status = int(e.code or 0)
    lines = []
    for line in out.getvalue().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            lines.append(json.loads(line))
    return status, lines, err.getvalue()


_NO_INDEX: list[bool] = []


def has_no_index() -> bool:
    """Does this checkout's ``canon import lorebook`` take ``--no-index``?"""
    if not _NO_INDEX:
        from canon_ledger.infrastructure import cli

        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            with contextlib.suppress(SystemExit):
                cli.main(["import", "lorebook", "--help"])
        _NO_INDEX.append("--no-index" in out.getvalue())
    return _NO_INDEX[0]


def lore_items(packet: Any, keys: set[str]) -> dict[str, Any]:
    """The packet's items that are imported entries, by key (the first, as the packet lists them)."""
    out: dict[str, Any] = {}
    for i in packet.items:
        if i.key in keys and i.kind not in STRUCTURAL:
            out.setdefault(i.key, i)
    return out


def by_mention(item: Any) -> bool:
    """Is the item in the packet because the text mentions it: a reason that starts "mentioned",
    or a trimmed item's "trimmed ... (mentioned ...)"?"""
    return re.search(r"(^|\()mentioned", item.reason) is not None


def kept(item: Any) -> bool:
    return item is not None and item.status in ("included", "trimmed")


def measure_book(path: Path, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    from canon_ledger.application.packets.recipes import Request
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.domain.lorebook import read
    from canon_ledger.infrastructure.bootstrap import bootstrap

    row: dict[str, Any] = {"book": path.name, "format": "-", "language": "-", "entries": 0, "imported": 0,
                           "always_on": 0, "selective": 0, "notes": []}
    try:
        book = read(path.read_bytes())
    except Exception as e:  # noqa: BLE001 - reported
        row["error"] = f"{type(e).__name__}: {getattr(e, 'code', '')}: {e}"
        return row
    planned = planned_entries(book, STORY)
    lang = language([k for p in planned for k in p.rule.keys] + [p.name for p in planned]
                    + [p.text[:400] for p in planned])
    rules = {p.key: p.rule for p in planned if p.status == "import"}
    constants = [p.key for p in planned if p.status == "import" and p.rule.constant]
    row.update(format=book.format, language=lang, entries=len(book.entries), always_on=len(constants),
               selective=sum(1 for p in planned if p.status == "import" and p.rule.secondary and not p.rule.constant),
               disabled=len(book.disabled), refused_plan=sum(1 for p in planned if p.status == "refused"))
    with tempfile.TemporaryDirectory(prefix="canon_lore_") as folder:
        url = f"sqlite:///{Path(folder) / 'lore.db'}"
        bootstrap(url, embedder=args.embedder).close()  # `canon init`
        t0 = time.perf_counter()
        status, lines, err = import_cli(url, path, STORY)
        row["import_seconds"] = round(time.perf_counter() - t0, 2)
        row["import_status"] = status
        last = lines[-1] if lines else {}
        if status != 0:
            row["notes"].append(f"import exit {status}: " + (json.dumps(last, ensure_ascii=False)[:400] if last
                                                               else err.strip()[:400]))
        services = bootstrap(url, embedder=args.embedder)
        try:
            if status != 0 and not services.ledger.event_log.position():
                raise RuntimeError("nothing imported")
            k_scenes, cases = scenes(planned, lang, seed, args.trials)
            commands: list[dict[str, Any]] = []
            if args.lore_cap is not None:  # a checkout without set_lore_cap refuses it: the row says so
                commands.append({"type": "set_lore_cap", "command_id": "bench:lore-cap", "story_id": STORY,
                                 "share": args.lore_cap})
            for s in [*k_scenes, *cases]:
                commands.append({"type": "plan_chapter", "command_id": f"bench:plan:{s.chapter}", "story_id": STORY,
                                 "chapter": s.chapter, "volume": 1, "goals": [s.goals]})
                if s.summary:
                    commands.append({"type": "add_scene_card", "command_id": f"bench:scene:{s.chapter}",
                                     "story_id": STORY, "chapter": s.chapter, "scene_id": "s1", "summary": s.summary,
                                     "characters": [], "locations": [], "threads": [], "callbacks": [], "items": []})
            if commands:
                results = services.ledger.apply([parse_command(c) for c in commands], atomic=True)
                bad = [r.as_dict() for r in results if not r.ok]
                if bad:
                    row["notes"].append(f"planning refused: {json.dumps(bad[0], ensure_ascii=False)[:300]}")
            keys = set(rules)
            row["imported"] = len(keys)
            stats: dict[str, Counter[str]] = {b: Counter() for b in ("default", "large")}
            dropped_named: list[str] = []
            untriggered_examples: list[str] = []
            budgets = {"default": None, "large": args.large}
            for s in k_scenes:
                for label, budget in budgets.items():
                    packet = services.packet(Request(STORY, "writer", s.chapter, None, budget), record=False)
                    items = lore_items(packet, keys)
                    st = stats[label]
                    st["budget"] = packet.budget
                    for key in s.named:
                        st["named"] += 1
                        item = items.get(key)
                        if kept(item) and by_mention(item):
                            st["recalled"] += 1
                        elif item is None:
                            st["missing"] += 1
                            if label == "large":
                                dropped_named.append(f"ch{s.chapter} {key}: not in the packet")
                        else:
                            st["not_by_mention" if kept(item) else "dropped"] += 1
                            if label == "large" or item.status == "dropped" or kept(item):
                                dropped_named.append(f"ch{s.chapter} {key} @{label}: {item.status}: {item.reason}")
                    for key, item in items.items():
                        if not kept(item) or key in s.named:
                            continue
                        rule = rules[key]
                        if rule.constant:
                            continue
                        if rule_fires(rule, s.text):
                            st["also_triggered"] += 1
                        else:
                            st["untriggered"] += 1
                            if len(untriggered_examples) < 3:
                                untriggered_examples.append(f"ch{s.chapter} @{label}: {item.kind} {key} "
                                                            f"({item.tier}, {item.reason})")
                    st["packets"] += 1
                    st["lore_kept"] += sum(1 for i in items.values() if kept(i))
            # always-on entries, in the first k=1 chapter's packets
            always: dict[str, Any] = {}
            first = k_scenes[0].chapter if k_scenes else None
            for label, budget in budgets.items():
                if first is None or not constants:
                    always[label] = {"kept": 0, "dropped": 0, "missing": 0, "reasons": []}
                    continue
                packet = services.packet(Request(STORY, "writer", first, None, budget), record=False)
                items = lore_items(packet, keys)
                a: dict[str, Any] = {"kept": 0, "dropped": 0, "missing": 0, "reasons": []}
                for key in constants:
                    item = items.get(key)
                    if kept(item):
                        a["kept"] += 1
                    elif item is None:
                        a["missing"] += 1
                    else:
                        a["dropped"] += 1
                        a["reasons"].append(item.reason)
                a["reasons"] = [f"{n} x {r}" for r, n in Counter(a["reasons"]).most_common(3)]
                always[label] = a
            # selective cases, at the large budget
            sel_ok, sel_bad = 0, []
            for s in cases:
                packet = services.packet(Request(STORY, "writer", s.chapter, None, args.large), record=False)
                item = lore_items(packet, keys).get(s.named[0])
                ok = (kept(item) and by_mention(item)) if s.expect else not kept(item)
                sel_ok += ok
                if not ok:
                    r = rules[s.named[0]]
                    got = "absent" if item is None else f"{item.status} ({item.reason})"
                    sel_bad.append(f"{s.named[0]} [{r.logic}] {'met' if s.expect else 'unmet'}: {got}")
            # latency: the first k=1 chapter's writer packet at the default budget
            latency = time_packet(services, first, args.repeat) if first is not None else None
            latency_large = time_packet(services, first, args.repeat, budget=args.large) if first is not None else None
        except Exception as e:  # noqa: BLE001 - the row says why the book has no figures
            row["error"] = f"{type(e).__name__}: {getattr(e, 'code', '')}: {e}"
            if row["notes"]:
                row["error"] += f" ({row['notes'][0]})"
            return row
        finally:
            services.close()
    for label in budgets:
        st = stats[label]
        row[f"recall_{label}"] = round(st["recalled"] / st["named"], 3) if st["named"] else None
        row[f"untriggered_{label}"] = st["untriggered"]
        row[f"also_triggered_{label}"] = st["also_triggered"]
        row[f"named_{label}"] = st["named"]
        row[f"named_dropped_{label}"] = st["dropped"]
        row[f"named_missing_{label}"] = st["missing"]
        row[f"named_not_by_mention_{label}"] = st["not_by_mention"]
        row[f"budget_{label}"] = st["budget"]
        row[f"lore_items_per_packet_{label}"] = round(st["lore_kept"] / st["packets"], 1) if st["packets"] else 0
    row["always_on_kept"] = always
    row["selective_cases"] = len(cases)
    row["selective_ok"] = sel_ok
    row["selective_failures"] = sel_bad
    row["named_not_recalled"] = dropped_named[:8]
    row["untriggered_examples"] = untriggered_examples
    row["scenes"] = [{"chapter": s.chapter, "kind": s.kind, "named": s.named, "goals": s.goals, "summary": s.summary}
                     for s in k_scenes[:2]]
    row["latency_ms"] = latency
    row["latency_large_ms"] = latency_large
    row["latency_goals"] = k_scenes[0].goals if k_scenes else None
    return row


def time_packet(services: Any, chapter: int, repeat: int, story: str = STORY,
                budget: int | None = None) -> dict[str, float]:
    from canon_ledger.application.packets.recipes import Request

    request = Request(story, "writer", chapter, None, budget)
    services.packet(request)  # warm-up: read models caught up, the packet recorded once
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        services.packet(request)
        times.append(time.perf_counter() - t0)
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in percentiles(times).items()}


def reference_latency(args: argparse.Namespace, goals: str, title: str) -> dict[str, dict[str, float]]:
    """The same chapter in a story without a lorebook: p50 of its writer packet."""
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap

    with tempfile.TemporaryDirectory(prefix="canon_lore_ref_") as folder:
        services = bootstrap(f"sqlite:///{Path(folder) / 'ref.db'}", embedder=args.embedder)
        try:
            services.ledger.apply([parse_command(c) for c in (
                {"type": "start_story", "command_id": "ref:start", "story_id": STORY, "title": title,
                 "style_guardrails": [], "output_contract": ""},
                {"type": "plan_chapter", "command_id": "ref:plan", "story_id": STORY, "chapter": 1, "volume": 1,
                 "goals": [goals]})], atomic=True)
            return {"default": time_packet(services, 1, args.repeat),
                    "large": time_packet(services, 1, args.repeat, budget=args.large)}
        finally:
            services.close()


# -- report ------------------------------------------------------------------------------------------
def fmt_recall(r: dict[str, Any], label: str) -> str:
    v = r.get(f"recall_{label}")
    return "-" if v is None else f"{v:.2f} ({round(v * r[f'named_{label}'])}/{r[f'named_{label}']})"


def table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| book | format | language | entries | always-on | recall@default | recall@large | untriggered@default "
           "| untriggered@large | always-on kept (default / large) | selective cases ok | p50 ms |",
           "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['book']} | - | - | - | - | import failed: {r['error'][:120]} | | | | | | |")
            continue
        a = r["always_on_kept"]
        kept_ = (f"{a['default']['kept']} / {a['large']['kept']} of {r['always_on']}" if r["always_on"] else "-")
        sel = f"{r['selective_ok']}/{r['selective_cases']}" if r["selective_cases"] else "-"
        p50 = r["latency_ms"]["p50"] if r.get("latency_ms") else "-"
        out.append(f"| {r['book']} | {r['format']} | {r['language']} | {r['entries']:,} | {r['always_on']} | "
                   f"{fmt_recall(r, 'default')} | {fmt_recall(r, 'large')} | {r['untriggered_default']} | "
                   f"{r['untriggered_large']} | {kept_} | {sel} | {p50} |")
    return out


def details(rows: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for r in rows:
        if "error" in r:
            out.append(f"- **{r['book']}**: not read: {r['error']}")
            continue
        bits = []
        if r["notes"]:
            bits.append("; ".join(r["notes"]))
        for label in ("default", "large"):
            d, m, n = (r[f"named_dropped_{label}"], r[f"named_missing_{label}"], r[f"named_not_by_mention_{label}"])
            if d or m or n:
                bits.append(f"named @{label} (budget {r[f'budget_{label}']:,}): {d} dropped, {m} not listed, "
                            f"{n} kept for another reason")
            if r[f"also_triggered_{label}"]:
                bits.append(f"also triggered by the same text @{label}: {r[f'also_triggered_{label}']}")
        bits.append(f"imported entries kept per packet: {r['lore_items_per_packet_default']} @default, "
                    f"{r['lore_items_per_packet_large']} @large")
        a = r["always_on_kept"]
        for label in ("default", "large"):
            if a[label]["dropped"] or a[label]["missing"]:
                bits.append(f"always-on @{label}: {a[label]['dropped']} dropped ({'; '.join(a[label]['reasons'])}), "
                            f"{a[label]['missing']} not listed")
        if r["named_not_recalled"]:
            bits.append("named, not recalled by mention: " + " | ".join(r["named_not_recalled"][:4]))
        if r["untriggered_examples"]:
            bits.append("untriggered e.g. " + " | ".join(r["untriggered_examples"]))
        if r["selective_failures"]:
            bits.append("selective failures: " + " | ".join(r["selective_failures"][:4]))
        if r.get("disabled"):
            bits.append(f"{r['disabled']} disabled entries not imported")
        out.append(f"- **{r['book']}** ({r['imported']} imported, {r['selective']} selective; import "
                   f"{r['import_seconds']} s): " + "; ".join(bits))
    return out


def files(args: argparse.Namespace) -> list[Path]:
    if args.lorebooks:
        return list(args.lorebooks)
    folder = Path(args.dir)
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lorebooks", nargs="*", type=Path, help="lorebook files (default: every one in --dir)")
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"where the lorebooks are (default {DEFAULT_DIR})")
    parser.add_argument("--trials", type=int, default=3, help="scenes per k (k = 1 and 3; default 3)")
    parser.add_argument("--large", type=int, default=LARGE, help=f"the large budget (default {LARGE:,})")
    parser.add_argument("--repeat", type=int, default=10, help="timed packets per book (default 10)")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--embedder", default="hashing", help="the stores' embedder (default hashing: no model)")
    parser.add_argument("--lore-cap", type=int, metavar="PERCENT",
                        help="set the story's lore cap (set_lore_cap) to PERCENT of the budget (default: none)")
    parser.add_argument("--note", help="a line for the report's head (which checkout was measured, say)")
    parser.add_argument("--json", action="store_true", help="print the JSON report (as --format json)")
    add_output_options(parser)
    args = parser.parse_args()
    if args.json:
        args.format = "json"
    os.environ["CANON_EMBEDDER"] = args.embedder  # the CLI import opens its own services
    m = machine_info()
    started = time.perf_counter()
    rows = []
    for path in files(args):
        log(f"{path.name} ...")
        t0 = time.perf_counter()
        rows.append(measure_book(path, args, args.seed ^ zlib.crc32(path.name.encode())))
        log(f"{path.name}: {time.perf_counter() - t0:.1f} s")
    measured = [r for r in rows if "error" not in r and r.get("latency_ms")]
    latency: dict[str, Any] = {}
    if measured:
        largest = max(measured, key=lambda r: r["entries"])
        ref = reference_latency(args, largest["latency_goals"], largest["book"])
        latency = {"book": largest["book"], "entries": largest["entries"], "p50_ms": largest["latency_ms"]["p50"],
                   "reference_p50_ms": ref["default"]["p50"],
                   "ratio": round(largest["latency_ms"]["p50"] / ref["default"]["p50"], 2),
                   "large_p50_ms": largest["latency_large_ms"]["p50"], "reference_large_p50_ms": ref["large"]["p50"],
                   "large_ratio": round(largest["latency_large_ms"]["p50"] / ref["large"]["p50"], 2),
                   "reference": ref, "with_lorebook": largest["latency_ms"],
                   "with_lorebook_large": largest["latency_large_ms"]}
    m |= {"wall_seconds": round(time.perf_counter() - started, 1), "loadavg_end": loadavg()}
    failed = [r["book"] for r in rows if "error" in r or r.get("import_status") or (r.get("recall_large") or 0) < 1.0
              or r.get("untriggered_default") or r.get("untriggered_large")]
    lines = header("bench_lorebooks.py", sys.argv[1:], m) + [
        f"- Stores: SQLite, embedder {args.embedder}; scenes: k = 1 and 3, {args.trials} each, plus up to "
        f"{SELECTIVE_CASES} selective entries x 2 cases; budgets: the story's default and {args.large:,}; "
        f"p50 of {args.repeat} writer packets; lore cap "
        f"{'none' if args.lore_cap is None else str(args.lore_cap) + '%'}", *([f"- Note: {args.note}"] if args.note else []), "",
        *table(rows), ""]
    if latency:
        lines.append(f"Latency: writer packet p50 {latency['p50_ms']} ms with {latency['book']} "
                     f"({latency['entries']:,} entries) against {latency['reference_p50_ms']} ms for the same chapter "
                     f"without a lorebook: {latency['ratio']}x at the default budget; {latency['large_p50_ms']} ms "
                     f"against {latency['reference_large_p50_ms']} ms ({latency['large_ratio']}x) at "
                     f"{args.large:,}.")
        lines.append("")
    lines += details(rows)
    lines += ["", f"Goals (recall 1.0 at {args.large:,}, 0 untriggered): "
              + ("met on every book." if not failed else f"missed on {', '.join(failed)}.")]
    report = {"machine": m, "note": args.note, "books": rows, "latency": latency, "goals_missed": failed}
    emit(report, args, "\n".join(lines))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
