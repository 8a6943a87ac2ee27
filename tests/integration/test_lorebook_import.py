"""``application.lorebook_import`` on both stores: the sample files' enabled entries become
confirmed canon with their keys as aliases; importing again appends nothing; bad entries write
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.lorebook_import import import_lorebook
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.lorebook import LoreEntry, Lorebook, read
from canon_ledger.infrastructure.bootstrap import bootstrap

from tests.shared_data import LOREBOOKS as SAMPLES


@pytest.fixture
def services(store_url: str) -> Any:
    s = bootstrap(store_url, embedder="hashing")
    [r] = s.ledger.apply([parse_command({"type": "start_story", "command_id": "s", "story_id": "el", "title": "Eldoria",
                                         "style_guardrails": [], "output_contract": ""})])
    assert r.status == "applied"
    yield s
    s.close()


@pytest.mark.parametrize("sample", ["sillytavern-world-info-eldoria.json", "sillytavern-card-seraphina.png"])
def test_a_sample_imports_confirmed_and_again_appends_nothing(services: Any, sample: str) -> None:
    book = read((SAMPLES / sample).read_bytes())
    report = import_lorebook(services.ledger, book, "el", confirm=True, valid_from=2)
    assert report.failed is None and report.counts == {"applied": 8} and report.entries == 4
    canon = services.views().canon_as_of("el", 2)
    entries = {e["key"]: e for e in canon}
    assert set(entries) == {"eldoria", "shadowfang", "glade", "power"}
    eldoria = services.views().entry("el", "world_rule", "eldoria")
    assert eldoria is not None and "magical forest" in str(eldoria)
    assert services.views().canon_as_of("el", 1) == []  # in force from chapter 2 only
    again = import_lorebook(services.ledger, book, "el", confirm=True, valid_from=2)
    assert again.counts == {"duplicate": 8} and again.position == report.position


def test_proposals_wait_for_review_without_confirm(services: Any) -> None:
    book = read((SAMPLES / "sillytavern-world-info-eldoria.json").read_bytes())
    import_lorebook(services.ledger, book, "el")
    assert services.views().canon_as_of("el", 1) == []
    assert len(services.views().proposals("el", "proposed")) == 4


def test_an_entry_out_of_bounds_writes_nothing(services: Any) -> None:
    before = services.ledger.position()
    book = Lorebook("sillytavern", "", [LoreEntry("1", "ok", ["ok"], "fine", True),
                                        LoreEntry("2", "huge", ["x" * 500], "text", True)])
    with pytest.raises(CanonError):
        import_lorebook(services.ledger, book, "el", confirm=True)
    assert services.ledger.position() == before
