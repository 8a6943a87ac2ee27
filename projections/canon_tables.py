"""The canon read model's tables: what packets are built from, and nothing else.

Rows are shaped for the packet query (CQRS): each fact is stored as a ready-to-pack item,
its rendered text and token count computed once here instead of on every packet. No table
here holds draft text or unconfirmed proposals: those never enter this model.

Table names carry the projection version, so a new version can be built beside the one
that is serving and then switched to.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import JSON, Boolean, Column, Integer, MetaData, String, Table, Text

VERSION = 1


@dataclass(frozen=True)
class CanonTables:
    metadata: MetaData
    stories: Table
    chapters: Table
    volumes: Table
    scene_cards: Table
    scene_tags: Table
    canon: Table
    aliases: Table
    chain_nodes: Table

    def all(self) -> list[Table]:
        return [self.stories, self.chapters, self.volumes, self.scene_cards, self.scene_tags,
                self.canon, self.aliases, self.chain_nodes]


def canon_tables(version: int = VERSION) -> CanonTables:
    md = MetaData()

    def name(base: str) -> str:
        return f"rm_{base}_v{version}"

    stories = Table(
        name("stories"), md,
        Column("story_id", String(200), primary_key=True),
        Column("title", Text, nullable=False),
        Column("guardrails_text", Text, nullable=False),
        Column("guardrails_tokens", Integer, nullable=False),
        Column("contract_text", Text, nullable=False),
        Column("contract_tokens", Integer, nullable=False),
        Column("budgets", JSON, nullable=False),
        Column("source", Integer, nullable=False),
        # The last position that changed this story's canon: a packet reflects this.
        Column("position", Integer, nullable=False),
    )
    chapters = Table(
        name("chapters"), md,
        Column("story_id", String(200), primary_key=True),
        Column("chapter", Integer, primary_key=True),
        Column("volume", Integer, nullable=False),
        Column("goals_text", Text, nullable=False),
        Column("goals_tokens", Integer, nullable=False),
        Column("goals_source", Integer, nullable=False),
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
    canon = Table(
        name("canon"), md,
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
    )
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
    return CanonTables(md, stories, chapters, volumes, scene_cards, scene_tags, canon, aliases, chain_nodes)
