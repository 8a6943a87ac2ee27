"""The canon read model's tables: what packets are built from, and nothing else.

Rows are shaped for the packet query (CQRS): each fact is stored as a ready-to-pack item,
its rendered text and token count computed once here instead of on every packet. No table
here holds draft text or unconfirmed proposals: those never enter this model.

Table names carry a tag (``v2_1``: schema version 2, build 1), so a new build can fill new
tables beside the ones serving packets and then be switched to (blue/green).

Version history (packet bytes must not depend on the version: issued packets stay auditable):
- v1: the first shape.
- v2: ``rm_canon`` gains ``aliases`` (the entry's names, for lookups) and indexes for the two
  packet queries that do not follow the primary key (tags by key; kinds as of a chapter).
- v3: ``rm_canon`` gains ``valid_to``, the chapter the next step takes over (NULL: still in
  force), so "as of chapter K" is a range test instead of ranking every step of a kind; the
  (story, kind, valid_from) index is gone (the primary key serves).
- v4: a covering index for "in force at chapter K, by kind": (story, kind, valid_to,
  valid_from) then every column a packet candidate needs except its text. The in-force rows
  are one index range (``valid_to IS NULL``) plus the few revised later (``valid_to > K``), read
  without touching the wide table rows. Caution: with no statistics (a fresh build) SQLite
  prefers it to the primary key for the projection's per-entry ``valid_to`` subquery, which
  then reads every entry of a kind; rebuilds therefore build secondary indexes after the fill
  and ANALYZE after their first page (``projections/read_models.py``, ``runner.py``).
- v5: the same covering index again, partial: only steps that are neither retired nor resolved
  (``is_active``). "Active threads as of K" read every thread's step in force and dropped the
  resolved ones, most of the index entries of a long story (docs/benchmarks.md).
  Both stores use a partial index only when the query states its condition in the same
  words, so the reader's ``canon_rules.ACTIVE`` says ``is_active`` with literals, not parameters.
- v6: mention-activated recall and stored query words. ``rm_canon`` gains ``recall`` (the
  entry's ``domain.recall.Rule`` when its fields say more than "name and aliases"; NULL
  otherwise) and an index on (story, source), so a reader tells in one index lookup whether a
  story's entries changed since it built its matcher (``projections.lore_index``);
  ``rm_chapters`` gains ``goal_items`` (the goals as listed) and ``rm_scene_cards``
  ``summary``, so L1's query and the mention matcher read the author's words, not text the
  projection rendered.

The as-of rule is ``canon_ledger.domain.canon_rules.valid_to``: an entry's steps are ordered by
(valid_from, step), and each one ends (``valid_to``) where the next in that order begins;
NULL while it is still in force. A step is in force at K iff ``valid_from <= K`` and
(``valid_to`` IS NULL or ``valid_to > K``). ``canon_rules.NEXT_FROM`` is that rule's one SQL
form: the projection writes it (``valid_to_update``, and on PostgreSQL ``valid_to_update_many``,
the same rule for many entries bound as arrays); every read only tests the stored column
(``canon_rules.IN_FORCE``, or its two index ranges).
- v7: lore gated and capped. ``rm_stories`` gains ``lore_share`` (the story's
  ``set_lore_cap``: percent of a packet's budget its lore may take; NULL: no cap), and the
  ``recall`` rule of ``rm_canon`` says ``gated``, ``order`` and ``ignore_budget`` (every
  imported lorebook entry is gated: it joins a packet only as its rule or a tag brings it in).
  A v6 build's rules read ungated; the rebuild projects them again.
- v8: the continuity check's facts. ``rm_canon`` gains ``facts`` (JSON: the
  structured facts of a version's ``fields``, ``domain.continuity.facts_of``; ``{}`` for a
  retirement), read with every step of an entry's timeline by ``CanonSnapshot.steps``. A v7
  build has no such column; the rebuild projects every version again, facts and all. Who knows
  what (the same version): ``rm_canon`` gains ``secret`` (True when the
  version's ``fields.secret`` is true; in the in-force index's covered columns, as every entry
  read selects it), ``rm_scene_cards`` gains ``pov`` (the card's point-of-view character, NULL:
  none), and ``rm_knowledge`` holds what each character knows (``CanonEntry.KnowledgeRecorded``:
  story, character, kind, key, the chapter from which, how, source), one row per (story,
  character, kind, key), the latest record (a correction) replacing the row.

- v9: series. ``rm_stories`` gains ``series_id``, ``series_role`` and ``series_ordinal``
  (``Story.JoinedSeries``: the series a story is the bible (role ``bible``, ordinal 0) or a
  book of (role ``book``, its place in reading order); NULL: in none), indexed by series, so a
  book's packet reads its homes in one statement (``application.packets.inherited``).
  ``rm_canon`` gains ``hidden_book`` (a series bible step's ``fields.hidden_until_book``: the
  book its ``hidden_until`` counts in; NULL: the first), outside the covering indexes: only a
  bible's few such steps are read, by story.

Only the current version's shape is defined: a store whose active build is older refuses to
serve until ``canon rebuild`` (``read_models.Outdated``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (JSON, Boolean, Column, Index, Integer, MetaData, String, Table, Text, TextClause, and_, false,
                        func, literal_column, text)

from canon_ledger.domain.canon_rules import NEXT_FROM, RESOLVED

VERSION = 9
# What a packet candidate needs besides its text, in the order the reader selects it.
IN_FORCE_COVERS = ("key", "step", "retired", "name", "state", "hidden_until", "tokens", "source", "secret")


def is_active(canon: Any) -> Any:
    """``canon_rules.ACTIVE`` as the partial index's condition, word for word (a unit test
    holds the two equal): a read that states ``ACTIVE`` can use the index. Literals, not bind
    parameters: the planner matches a partial index's condition against the query's text."""
    return and_(canon.c.retired == false(),
                func.coalesce(func.lower(canon.c.state), literal_column("''")) != literal_column(f"'{RESOLVED}'"))


@dataclass(frozen=True)
class CanonTables:
    tag: str
    version: int
    metadata: MetaData
    stories: Table
    chapters: Table
    volumes: Table
    scene_cards: Table
    scene_tags: Table
    canon: Table
    aliases: Table
    chain_nodes: Table
    knowledge: Table

    def all(self) -> list[Table]:
        return [self.stories, self.chapters, self.volumes, self.scene_cards, self.scene_tags,
                self.canon, self.aliases, self.chain_nodes, self.knowledge]


def canon_tables(tag: str, version: int = VERSION) -> CanonTables:
    """The tables of build ``tag``, in this version's shape (``version`` is recorded only)."""
    md = MetaData()

    def name(base: str) -> str:
        return f"rm_{base}_{tag}"

    stories = Table(
        name("stories"), md,
        Column("story_id", String(200), primary_key=True),
        Column("title", Text, nullable=False),
        Column("guardrails_text", Text, nullable=False),
        Column("guardrails_tokens", Integer, nullable=False),
        Column("contract_text", Text, nullable=False),
        Column("contract_tokens", Integer, nullable=False),
        Column("budgets", JSON, nullable=False),
        Column("lore_share", Integer),  # percent of a packet's budget lore may take (set_lore_cap); NULL: no cap
        Column("source", Integer, nullable=False),
        # The last position that changed this story's canon: a packet reflects this.
        Column("position", Integer, nullable=False),
        Column("series_id", String(200)),  # v9: the series it is the bible or a book of; NULL: none
        Column("series_role", String(20)),  # v9: "bible" or "book"
        Column("series_ordinal", Integer),  # v9: a book's place in reading order (1, 2, ...); 0 for the bible
    )
    Index(f"ix_{name('stories')}_series", stories.c.series_id, stories.c.series_ordinal)
    chapters = Table(
        name("chapters"), md,
        Column("story_id", String(200), primary_key=True),
        Column("chapter", Integer, primary_key=True),
        Column("volume", Integer, nullable=False),
        Column("goals_text", Text, nullable=False),
        Column("goals_tokens", Integer, nullable=False),
        Column("goals_source", Integer, nullable=False),
        Column("goal_items", JSON),  # the goals as listed
        Column("summary_text", Text),
        Column("summary_tokens", Integer),
        Column("summary_source", Integer),
        Column("text", Text),
        Column("text_tokens", Integer),
        Column("text_source", Integer),
    )
    volumes = Table(
        name("volumes"), md,
        Column("story_id", String(200), primary_key=True),
        Column("volume", Integer, primary_key=True),
        Column("summary_text", Text),
        Column("summary_tokens", Integer),
        Column("summary_source", Integer),
    )
    scene_cards = Table(
        name("scene_cards"), md,
        Column("story_id", String(200), primary_key=True),
        Column("chapter", Integer, primary_key=True),
        Column("scene_id", String(200), primary_key=True),
        Column("text", Text, nullable=False),
        Column("tokens", Integer, nullable=False),
        Column("source", Integer, nullable=False),
        Column("summary", Text),  # the card's summary as written
        Column("pov", String(200)),  # the point-of-view character's key (v8); NULL: none
    )
    scene_tags = Table(
        name("scene_tags"), md,
        Column("story_id", String(200), primary_key=True),
        Column("chapter", Integer, primary_key=True),
        Column("scene_id", String(200), primary_key=True),
        Column("tag_type", String(20), primary_key=True),
        Column("ordinal", Integer, primary_key=True),
        Column("key", String(200), nullable=False),
    )
    canon_columns: list[Column[Any]] = [
        Column("story_id", String(200), primary_key=True),
        Column("kind", String(40), primary_key=True),
        Column("key", String(200), primary_key=True),
        # The CanonEntry's event version: steps of one entry's timeline, in confirmation order.
        Column("step", Integer, primary_key=True),
        Column("valid_from", Integer, nullable=False),
        Column("retired", Boolean, nullable=False),
        Column("name", Text, nullable=False),
        Column("state", String(40)),
        Column("hidden_until", Integer),
        Column("text", Text, nullable=False),
        Column("tokens", Integer, nullable=False),
        Column("source", Integer, nullable=False),
        Column("aliases", JSON),  # the entry's names, for lookups
        # The chapter the entry's next step takes over (NULL: still in force): ``NEXT_FROM``.
        Column("valid_to", Integer),
        Column("recall", JSON),  # domain.recall.Rule.as_dict(), or NULL: name and aliases, whole words, any case
        Column("facts", JSON),  # v8: domain.continuity.facts_of(fields) ({} for a retirement; NULL reads as {})
        Column("secret", Boolean, nullable=False, default=False),  # v8: the version's fields.secret is true
        Column("hidden_book", String(200)),  # v9: fields.hidden_until_book (a series bible's step); NULL: none
    ]
    canon = Table(name("canon"), md, *canon_columns)
    Index(f"ix_{name('canon')}_key", canon.c.story_id, canon.c.key)
    # Has the story's canon changed since a matcher was built? (``max(source)``)
    Index(f"ix_{name('canon')}_source", canon.c.story_id, canon.c.source)
    # "In force at chapter K, by kind": one index range (``valid_to IS NULL``) plus the few
    # steps revised later (``valid_to > K``), read without the wide rows (no text).
    Index(f"ix_{name('canon')}_in_force", canon.c.story_id, canon.c.kind, canon.c.valid_to, canon.c.valid_from,
          *(canon.c[c] for c in IN_FORCE_COVERS))
    # The same, of the steps neither retired nor resolved only (active threads).
    Index(f"ix_{name('canon')}_active", canon.c.story_id, canon.c.kind, canon.c.valid_to, canon.c.valid_from,
          *(canon.c[c] for c in IN_FORCE_COVERS), sqlite_where=is_active(canon), postgresql_where=is_active(canon))
    aliases = Table(
        name("aliases"), md,
        Column("story_id", String(200), primary_key=True),
        Column("alias", String(400), primary_key=True),  # casefolded
        Column("kind", String(40), primary_key=True),
        Column("key", String(200), primary_key=True),
        Column("step", Integer, primary_key=True),
        Column("valid_from", Integer, nullable=False),
    )
    chain_nodes = Table(
        name("chain_nodes"), md,
        Column("story_id", String(200), primary_key=True),
        Column("chain", String(200), primary_key=True),
        Column("step", Integer, primary_key=True),
        Column("ordinal", Integer, primary_key=True),
        Column("node_id", String(200), nullable=False),
        Column("node_kind", String(40), nullable=False),
        Column("valid_from", Integer, nullable=False),
        Column("hidden_until", Integer),
        Column("text", Text, nullable=False),
        Column("tokens", Integer, nullable=False),
        Column("source", Integer, nullable=False),
    )
    # What each character knows: the latest record per (character, entry); read by
    # story (and characters) on the primary key, the chapter a filter.
    knowledge = Table(
        name("knowledge"), md,
        Column("story_id", String(200), primary_key=True),
        Column("character", String(200), primary_key=True),
        Column("kind", String(40), primary_key=True),
        Column("key", String(200), primary_key=True),
        Column("chapter", Integer, nullable=False),  # from which the character knows it
        Column("how", Text, nullable=False),
        Column("source", Integer, nullable=False),
    )
    return CanonTables(tag, version, md, stories, chapters, volumes, scene_cards, scene_tags, canon, aliases,
                       chain_nodes, knowledge)


# -- the as-of rule, written (``canon_rules.NEXT_FROM``) ------------------------------------------

def valid_to_update(table: str) -> TextClause:
    """Re-derive ``valid_to`` for every step of the entry (:b_story, :b_kind, :b_key); only
    rows whose value changes are written (usually the step before the new one)."""
    next_from = NEXT_FROM.format(table=table)
    return text(
        f'UPDATE "{table}" AS cn SET valid_to = {next_from} '
        'WHERE cn.story_id = :b_story AND cn.kind = :b_kind AND cn."key" = :b_key '
        f'AND cn.valid_to IS DISTINCT FROM {next_from}')


def valid_to_update_many(table: str) -> TextClause:
    """PostgreSQL: ``valid_to_update`` for many entries in one statement, the entries bound as
    three arrays (:stories, :kinds, :keys)."""
    next_from = NEXT_FROM.format(table=table)
    return text(
        f'UPDATE "{table}" AS cn SET valid_to = {next_from} '
        'FROM unnest(CAST(:stories AS varchar[]), CAST(:kinds AS varchar[]), CAST(:keys AS varchar[])) AS v(s, k, e) '
        'WHERE cn.story_id = v.s AND cn.kind = v.k AND cn."key" = v.e '
        f'AND cn.valid_to IS DISTINCT FROM {next_from}')
