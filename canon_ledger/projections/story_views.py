"""Read views for people and the authoring app, as plain SQL over the serving builds.

These answer the HTTP API's and the CLI's browsing questions (which stories, what canon is
in force as of chapter K, one entry's history, one chapter, the proposals (by state), the
drafts, who knows what as of chapter K). They read the same tables packets are compiled from (canon) and the authoring
model (drafts, proposals), in one transaction each, and never write. They are not on the
packet path: nothing here is a packet candidate.

"In force as of chapter K" is the domain's rule (``CanonEntry.as_of``): of an entry's steps
with ``valid_from <= K``, the latest (highest ``valid_from``, then the later confirmation)
holds, unless it retired the entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from canon_ledger.domain import canon_rules
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.domain.canon_rules import ACTIVE, IN_FORCE, InForce, in_force_sql
from canon_ledger.domain.series import BIBLE, bible_reveal, inherits_from
from canon_ledger.projections.driver_sql import for_sqlite, json_column

Tables = Callable[[Connection], Any]  # the serving build's table set, read in ``conn``'s transaction


def _rows(conn: Connection, sql: str, **params: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(text(sql), params).mappings()]


class StoryViews:
    def __init__(self, engine: Engine, canon: Tables, authoring: Tables) -> None:
        self.engine = engine
        self._canon = canon
        self._authoring = authoring

    def _names(self, conn: Connection) -> dict[str, str]:
        c, a = self._canon(conn), self._authoring(conn)
        return {"stories": c.stories.name, "chapters": c.chapters.name, "volumes": c.volumes.name,
                "canon": c.canon.name, "aliases": c.aliases.name, "scene_cards": c.scene_cards.name,
                "scene_tags": c.scene_tags.name, "proposals": a.proposals.name, "drafts": a.drafts.name,
                "dismissed": a.dismissed.name, "knowledge": c.knowledge.name}

    def stories(self, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Every story (or those in ``only``) with its counts, by id."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            rows = _rows(conn, f"""
                SELECT s.story_id, s.title, s.position, s.series_id, s.series_role, s.series_ordinal,
                       (SELECT count(*) FROM {t['chapters']} c WHERE c.story_id = s.story_id) AS chapters,
                       (SELECT count(*) FROM {t['chapters']} c
                         WHERE c.story_id = s.story_id AND c.text IS NOT NULL) AS chapters_with_text,
                       (SELECT count(DISTINCT c.volume) FROM {t['chapters']} c
                         WHERE c.story_id = s.story_id) AS volumes,
                       (SELECT count(*) FROM {t['canon']} e WHERE e.story_id = s.story_id AND e.step =
                          (SELECT max(l.step) FROM {t['canon']} l
                            WHERE l.story_id = e.story_id AND l.kind = e.kind AND l.key = e.key)) AS entries,
                       (SELECT count(*) FROM {t['proposals']} p
                         WHERE p.story_id = s.story_id AND p.status = 'proposed') AS proposals_proposed
                  FROM {t['stories']} s
                 ORDER BY s.story_id""")
        for r in rows:  # the same count under its old name (``pending_proposals``), for older clients
            r["pending_proposals"] = r["proposals_proposed"]
            r["series"] = _series(r)
        return [r for r in rows if not only or r["story_id"] in only]

    def story_head(self, story_id: str) -> dict[str, Any] | None:
        """The story's id, title, position and last planned chapter (None: no chapter yet), or
        None if it was never started: one indexed read, for pages that need no counts."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            found = _rows(conn, f"""
                SELECT s.story_id, s.title, s.position, s.series_id, s.series_role, s.series_ordinal,
                       (SELECT max(c.chapter) FROM {t['chapters']} c WHERE c.story_id = s.story_id) AS last_chapter
                  FROM {t['stories']} s WHERE s.story_id = :s""", s=story_id)
        if not found:
            return None
        found[0]["series"] = _series(found[0])
        return found[0]

    def story(self, story_id: str) -> dict[str, Any] | None:
        with self.engine.begin() as conn:
            t = self._names(conn)
            found = _rows(conn, f"SELECT story_id, title, budgets, position FROM {t['stories']} WHERE story_id = :s",
                          s=story_id)
            if not found:
                return None
            story = found[0]
            story["budgets"] = json_column(story["budgets"])
            story["chapters"] = _rows(conn, f"""
                SELECT chapter, volume, summary_text IS NOT NULL AS summarised, text IS NOT NULL AS text_accepted
                  FROM {t['chapters']} WHERE story_id = :s ORDER BY chapter""", s=story_id)
            # Every volume a chapter is planned in, summarised or not: the count ``stories`` gives.
            story["volumes"] = _rows(conn, f"""
                SELECT n.volume, EXISTS (SELECT 1 FROM {t['volumes']} v WHERE v.story_id = :s AND v.volume = n.volume
                                           AND v.summary_text IS NOT NULL) AS summarised
                  FROM (SELECT DISTINCT volume FROM {t['chapters']} WHERE story_id = :s) n
                 ORDER BY n.volume""", s=story_id)
            story["entries_by_kind"] = {r["kind"]: r["n"] for r in _rows(conn, f"""
                SELECT kind, count(DISTINCT key) AS n FROM {t['canon']} WHERE story_id = :s
                 GROUP BY kind ORDER BY kind""", s=story_id)}
            story["proposals_by_status"] = {r["status"]: r["n"] for r in _rows(conn, f"""
                SELECT status, count(*) AS n FROM {t['proposals']} WHERE story_id = :s
                 GROUP BY status ORDER BY status""", s=story_id)}
        for row in story["chapters"] + story["volumes"]:
            for flag in ("summarised", "text_accepted"):
                if flag in row:
                    row[flag] = bool(row[flag])
        return story

    def canon_as_of(self, story_id: str, chapter: int, kind: str | None = None, *,
                    active: bool = False) -> list[dict[str, Any]]:
        """Confirmed entries in force as of ``chapter``, by kind and key (retired ones left out;
        hidden ones shown with their ``hidden_until``, as a packet lists them blocked).
        ``active``: only those whose ``state`` is not ``resolved`` (case-insensitive), the rule
        packets use for open threads (``canon_rules.ACTIVE``, in the words of its partial index)."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            said = ACTIVE if conn.dialect.name == "postgresql" else for_sqlite(ACTIVE)  # the index's words
            active_only = f" AND {said}" if active else ""
            of_kind = " AND kind = :kind" if kind is not None else ""  # a range of the (story, kind) indexes
            homes = self._homes(conn, story_id)
            if not homes:
                rows = _rows(conn, f"""
                    SELECT kind, key, step, valid_from, name, state, hidden_until, text, source, aliases
                      FROM {t['canon']}
                     WHERE story_id = :s AND {IN_FORCE}{of_kind} AND NOT retired{active_only}
                     ORDER BY kind, key""", s=story_id, chapter=chapter, kind=kind)
                return [_entry_row(r) | {"inherited_from": None} for r in rows]
            # A book: per (kind, key), the first home with a step in force (a retirement too).
            found: dict[tuple[str, str], dict[str, Any]] = {}
            for home, at in [(None, chapter), *((h, MAX_CHAPTER) for h in homes)]:
                for r in _rows(conn, f"""
                    SELECT kind, key, step, valid_from, name, state, retired, hidden_until, hidden_book, text, source,
                           aliases
                      FROM {t['canon']}
                     WHERE story_id = :s AND {IN_FORCE}{of_kind}""", s=home["story_id"] if home else story_id,
                               chapter=at, kind=kind):
                    if (r["kind"], r["key"]) in found:
                        continue
                    if home is not None:
                        r["hidden_until"] = self._revealed(home, r)
                        if r["hidden_until"] is False:
                            continue
                    r["inherited_from"] = None if home is None else {
                        "story_id": home["story_id"], "role": home["role"], "ordinal": home["ordinal"],
                        "title": home["title"], "as_of": "its current canon" if home["role"] == BIBLE
                        else "its last chapter"}
                    found[(r["kind"], r["key"])] = r
        rows = [found[k] for k in sorted(found) if not found[k].pop("retired")
                and (not active or canon_rules.active(False, found[k]["state"]))]
        for r in rows:
            r.pop("hidden_book")
        return [_entry_row(r) for r in rows]

    @staticmethod
    def _revealed(home: dict[str, Any], row: dict[str, Any]) -> int | None | bool:
        """An inherited step's ``hidden_until`` in the book reading it: an earlier book's is
        revealed by its end, a bible's is ``series.bible_reveal``'s (False: not seen at all)."""
        if home["role"] != BIBLE:
            return None
        return bible_reveal(row["hidden_until"], row["hidden_book"], home["books"], home["reader"])

    def _homes(self, conn: Connection, story_id: str) -> list[dict[str, Any]]:
        """Where a book of a series inherits from, in precedence order (``series.inherits_from``);
        none for any other story."""
        t = self._names(conn)
        members = _rows(conn, f"""
            SELECT m.story_id, m.title, m.series_role AS role, m.series_ordinal AS ordinal
              FROM {t['stories']} s JOIN {t['stories']} m ON m.series_id = s.series_id
             WHERE s.story_id = :s""", s=story_id)
        homes = inherits_from(story_id, members, lambda m: (m["story_id"], m["role"], m["ordinal"])) or []
        books = {m["story_id"]: m["ordinal"] for m in members if m["role"] != BIBLE}
        return [h | {"books": books, "reader": books[story_id]} for h in homes]

    def entries_named(self, story_id: str, word: str) -> list[dict[str, Any]]:
        """The confirmed entry versions whose name or one of whose aliases is ``word`` (any
        case), latest step first: kind, key, name, aliases."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            rows = _rows(conn, f"""
                SELECT a.kind, a.key, c.name, c.aliases
                  FROM {t['aliases']} a JOIN {t['canon']} c
                    ON c.story_id = a.story_id AND c.kind = a.kind AND c.key = a.key AND c.step = a.step
                 WHERE a.story_id = :s AND a.alias = :w
                 ORDER BY a.step DESC""", s=story_id, w=word.casefold())
        return [_entry_row(r) for r in rows]

    def entry(self, story_id: str, kind: str, key: str) -> dict[str, Any] | None:
        """One entry's every confirmed step, in confirmation order, with the chapters whose
        scene cards tag it."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            steps = _rows(conn, f"""
                SELECT step, valid_from, retired, name, state, hidden_until, text, source, aliases
                  FROM {t['canon']} WHERE story_id = :s AND kind = :kind AND key = :key ORDER BY step""",
                          s=story_id, kind=kind, key=key)
            if not steps:
                return None
            tagged = [r["chapter"] for r in _rows(conn, f"""
                SELECT DISTINCT chapter FROM {t['scene_tags']} WHERE story_id = :s AND key = :key
                 ORDER BY chapter""", s=story_id, key=key)]
        for step in steps:
            step["retired"] = bool(step["retired"])
            step["aliases"] = json_column(step.get("aliases")) or []
        return {"story_id": story_id, "kind": kind, "key": key, "name": steps[-1]["name"],
                "retired": steps[-1]["retired"], "versions": steps, "tagged_in_chapters": tagged}

    def chapter(self, story_id: str, number: int) -> dict[str, Any] | None:
        with self.engine.begin() as conn:
            t = self._names(conn)
            found = _rows(conn, f"""
                SELECT chapter, volume, goals_text, goals_source, summary_text, summary_source,
                       text IS NOT NULL AS text_accepted, text_tokens, text_source
                  FROM {t['chapters']} WHERE story_id = :s AND chapter = :n""", s=story_id, n=number)
            if not found:
                return None
            chapter = found[0]
            cards = _rows(conn, f"""
                SELECT scene_id, text, source FROM {t['scene_cards']} WHERE story_id = :s AND chapter = :n
                 ORDER BY scene_id""", s=story_id, n=number)
            tags = _rows(conn, f"""
                SELECT scene_id, tag_type, key FROM {t['scene_tags']} WHERE story_id = :s AND chapter = :n
                 ORDER BY scene_id, tag_type, ordinal""", s=story_id, n=number)
        chapter["text_accepted"] = bool(chapter["text_accepted"])
        for card in cards:
            card["tags"] = [{"type": g["tag_type"], "key": g["key"]} for g in tags if g["scene_id"] == card["scene_id"]]
        chapter["scenes"] = cards
        return {"story_id": story_id, **chapter}

    def who_knows(self, story_id: str, chapter: int) -> dict[str, list[dict[str, Any]]]:
        """Who knows what as of ``chapter``, in one transaction: ``secrets``, the entries
        whose version in force then has ``secret`` true (kind, key, step, valid_from, name,
        hidden_until, text, source; by kind and key); ``knowledge``, every record of one of them
        from a chapter up to ``chapter`` (kind, key, character, chapter, how, source); ``pov``, the
        point-of-view characters of the scene cards up to ``chapter`` (key); ``characters``, the
        character versions in force then (key, step, valid_from, name, hidden_until, source)."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            secrets = _rows(conn, f"""
                SELECT kind, key, step, valid_from, name, hidden_until, text, source FROM {t['canon']}
                 WHERE story_id = :s AND {IN_FORCE} AND NOT retired AND secret
                 ORDER BY kind, key""", s=story_id, chapter=chapter)
            knowledge = _rows(conn, f"""
                SELECT k.kind, k."key", k."character", k.chapter, k.how, k.source FROM {t['knowledge']} k
                 WHERE k.story_id = :s AND k.chapter <= :chapter AND EXISTS (
                       SELECT 1 FROM {t['canon']} c
                        WHERE c.story_id = k.story_id AND c.kind = k.kind AND c."key" = k."key"
                          AND {in_force_sql('c')}
                          AND NOT c.retired AND c.secret)
                 ORDER BY k.kind, k."key", k.chapter, k."character" """, s=story_id, chapter=chapter) if secrets else []
            pov = _rows(conn, f"""
                SELECT DISTINCT pov AS key FROM {t['scene_cards']}
                 WHERE story_id = :s AND chapter <= :chapter AND pov IS NOT NULL ORDER BY pov""",
                        s=story_id, chapter=chapter)
            characters = _rows(conn, f"""
                SELECT key, step, valid_from, name, hidden_until, source FROM {t['canon']}
                 WHERE story_id = :s AND kind = 'character' AND {IN_FORCE} AND NOT retired
                 ORDER BY key""", s=story_id, chapter=chapter)
        return {"secrets": secrets, "knowledge": knowledge, "pov": pov, "characters": characters}

    def knowledge_of(self, story_id: str, character: str, chapter: int) -> dict[str, Any] | None:
        """What ``character`` knows as of ``chapter``, or None if no character of that
        key was ever confirmed in the story: ``character``, its version in force then (step,
        valid_from, name, hidden_until, source; None if none is, or a retirement), and ``knows``,
        its every knowledge record from a chapter up to ``chapter`` (kind, key, chapter, how,
        source) beside the known entry's step in force then (``step``, ``valid_from``, ``retired``,
        ``name``, ``hidden_until``, ``secret``), by chapter, kind and key. One transaction."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            steps = _rows(conn, f"""
                SELECT step, valid_from, valid_to, retired, name, hidden_until, source FROM {t['canon']}
                 WHERE story_id = :s AND kind = 'character' AND key = :c ORDER BY step""", s=story_id, c=character)
            if not steps:
                return None
            knows = _rows(conn, f"""
                SELECT k.kind, k."key", k.chapter, k.how, k.source, c.step, c.valid_from, c.retired, c.name,
                       c.hidden_until, c.secret
                  FROM {t['knowledge']} k LEFT JOIN {t['canon']} c
                    ON c.story_id = k.story_id AND c.kind = k.kind AND c."key" = k."key"
                   AND {in_force_sql('c')}
                 WHERE k.story_id = :s AND k."character" = :c AND k.chapter <= :chapter
                 ORDER BY k.chapter, k.kind, k."key" """, s=story_id, c=character, chapter=chapter)
        now = [r for r in steps if InForce(r["valid_from"], r["valid_to"]).holds_at(chapter)]
        current = now[0] if now and not now[0]["retired"] else None
        for row in knows:
            row["retired"] = bool(row["retired"]) if row["retired"] is not None else None
            row["secret"] = bool(row["secret"])
        if current is not None:
            current = {k: current[k] for k in ("step", "valid_from", "name", "hidden_until", "source")}
        return {"character": current, "knows": knows}

    def proposals(self, story_id: str, status: str | None = None) -> list[dict[str, Any]]:
        """The story's proposals (of one status), each with its whole version as proposed
        (name, aliases, text, fields, tags, valid_from), by the position that last changed them."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            rows = _rows(conn, f"""
                SELECT proposal_id, kind, key, name, aliases, text, fields, tags, valid_from, status, reason, source
                  FROM {t['proposals']} WHERE story_id = :s AND (CAST(:status AS VARCHAR(20)) IS NULL OR status = :status)
                 ORDER BY source""", s=story_id, status=status)
        return [_proposal_row(r) for r in rows]

    def review(self, story_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What the review queue compares: the pending proposals (as ``proposals``), and every
        confirmed step of the entries they name, in (kind, key, step) order, each with the
        version its confirmation made as proposed (``proposal_id``, ``aliases``, ``text``,
        ``fields``, ``tags``: None for a retirement) beside the canon row's ``name``,
        ``valid_from``, ``retired`` and ``rendered`` text. One transaction."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            pending = _rows(conn, f"""
                SELECT proposal_id, kind, key, name, aliases, text, fields, tags, valid_from, status, reason, source
                  FROM {t['proposals']} WHERE story_id = :s AND status = 'proposed' ORDER BY source""", s=story_id)
            steps = _rows(conn, f"""
                SELECT c.kind, c.key, c.step, c.valid_from, c.retired, c.name, c.hidden_until, c.text AS rendered,
                       c.source, a.proposal_id, a.aliases, a.text, a.fields, a.tags
                  FROM {t['canon']} c
                  LEFT JOIN {t['proposals']} a
                    ON a.story_id = c.story_id AND a.kind = c.kind AND a.key = c.key AND a.step = c.step
                 WHERE c.story_id = :s AND EXISTS (
                       SELECT 1 FROM {t['proposals']} p
                        WHERE p.story_id = c.story_id AND p.kind = c.kind AND p.key = c.key AND p.status = 'proposed')
                 ORDER BY c.kind, c.key, c.step""", s=story_id)
        for step in steps:
            step["retired"] = bool(step["retired"])
            step["aliases"] = json_column(step["aliases"]) if step["aliases"] is not None else None
            step["fields"] = json_column(step["fields"]) if step["fields"] is not None else None
            step["tags"] = json_column(step["tags"]) if step["tags"] is not None else None
        return [_proposal_row(r) for r in pending], steps

    def drafts(self, story_id: str, chapter: int | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """The story's drafts (of a chapter, in a status), each with the continuity findings dismissed
        on it (``dismissed``: {finding_id, reason, source}, by finding id) and its ``override_reason``."""
        with self.engine.begin() as conn:
            t = self._names(conn)
            drafts = _rows(conn, f"""
                SELECT draft_id, chapter, status, reason, text, source, override_reason
                  FROM {t['drafts']} WHERE story_id = :s AND (CAST(:chapter AS INTEGER) IS NULL OR chapter = :chapter)
                   AND (CAST(:status AS VARCHAR(20)) IS NULL OR status = :status)
                 ORDER BY chapter, source""", s=story_id, chapter=chapter, status=status)
            dismissed: dict[str, list[dict[str, Any]]] = {}
            if drafts:
                for r in _rows(conn, f"""
                        SELECT d.draft_id, d.finding_id, d.reason, d.source FROM {t['dismissed']} d
                         WHERE d.story_id = :s AND EXISTS (
                               SELECT 1 FROM {t['drafts']} r WHERE r.story_id = d.story_id AND r.draft_id = d.draft_id
                                  AND (CAST(:chapter AS INTEGER) IS NULL OR r.chapter = :chapter)
                                  AND (CAST(:status AS VARCHAR(20)) IS NULL OR r.status = :status))
                         ORDER BY d.draft_id, d.finding_id""", s=story_id, chapter=chapter, status=status):
                    dismissed.setdefault(r.pop("draft_id"), []).append(r)
        for draft in drafts:
            draft["dismissed"] = dismissed.get(draft["draft_id"], [])
        return drafts


def _proposal_row(r: dict[str, Any]) -> dict[str, Any]:
    for name, empty in (("aliases", []), ("fields", {}), ("tags", [])):
        r[name] = json_column(r.get(name)) or empty
    return r


def _series(r: dict[str, Any]) -> dict[str, Any] | None:
    """A story's place in a series (``series_id``, ``role``, ``ordinal``), or None."""
    series = {"series_id": r.pop("series_id"), "role": r.pop("series_role"), "ordinal": r.pop("series_ordinal")}
    return series if series["series_id"] is not None else None


def _entry_row(r: dict[str, Any]) -> dict[str, Any]:
    r["aliases"] = json_column(r.get("aliases")) or []
    return r
