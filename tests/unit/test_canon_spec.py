"""Canon lifecycle: proposed -> confirmed | rejected; confirmed -> revised | retired."""

from canon_ledger.domain.canon import CanonEntry
from canon_ledger.domain.canon_rules import valid_to
from tests.unit.spec import confirm, given, propose, reject, retire, start


def test_proposing_canon():
    given(start()).when(propose("p", key="ann", aliases=["Annie"])).then(
        ("CanonProposal.Proposed", {"key": "ann", "aliases": ["Annie"], "valid_from": 1})
    )


def test_proposal_ids_are_unique():
    given(start(), propose("p")).when(propose("p", key="bob")).then_error("proposal_id_must_be_unique", "proposal_id")


def test_confirming_establishes_the_entry():
    given(start(), propose("p", key="ann")).when(confirm("p")).then(
        "CanonProposal.Confirmed", ("CanonEntry.Established", {"kind": "character", "key": "ann"})
    )


def test_a_confirmed_proposal_for_an_existing_key_is_a_revision_from_its_valid_from():
    events = given(start(), propose("p1", key="ann"), confirm("p1"), propose("p2", key="ann", valid_from=7)).when(
        confirm("p2")
    ).then("CanonProposal.Confirmed", "CanonEntry.Revised")
    revised = events[-1] if type(events[-1]).__qualname__ == "CanonEntry.Revised" else events[0]
    assert revised.version["valid_from"] == 7 and revised.version["proposal_id"] == "p2"


def test_a_rejected_proposal_cannot_be_confirmed():
    given(start(), propose("p"), reject("p")).when(confirm("p")).then_error(
        "rejected_proposal_cannot_be_confirmed", "proposal_id"
    )


def test_a_proposal_is_confirmed_once():
    given(start(), propose("p"), confirm("p")).when(confirm("p")).then()  # again: nothing changes


def test_a_confirmed_proposal_cannot_be_rejected():
    given(start(), propose("p"), confirm("p")).when(reject("p")).then_error("confirmed_proposal_cannot_be_rejected")


def test_unknown_proposals_are_refused():
    given(start()).when(confirm("nope")).then_error("unknown_proposal", "proposal_id")


def test_retiring_confirmed_canon():
    given(start(), propose("p", key="ann"), confirm("p")).when(retire("character", "ann", 40)).then(
        ("CanonEntry.Retired", {"valid_from": 40})
    )


def test_only_confirmed_canon_can_be_retired():
    given(start(), propose("p", key="ann")).when(retire("character", "ann", 4)).then_error("unknown_canon_entry", "key")
    given(start(), propose("p", key="ann", valid_from=10), confirm("p")).when(retire("character", "ann", 4)).then_error(
        "only_confirmed_canon_can_be_retired", "valid_from"
    )
    given(start(), propose("p", key="ann"), confirm("p"), retire("character", "ann", 5)).when(
        retire("character", "ann", 9)
    ).then_error("only_confirmed_canon_can_be_retired")


def _entry(timeline):
    entry = CanonEntry(story_id="s", kind="character", key="ann", version=timeline[0])
    for step in timeline[1:]:
        entry.revise(version=step)
    return entry


def test_as_of_a_chapter_sees_the_last_step_in_force():
    entry = _entry([{"valid_from": 1, "text": "alive"}, {"valid_from": 40, "text": "dead"}])
    assert entry.as_of(12)["text"] == "alive"
    assert entry.as_of(40)["text"] == "dead"
    # A later confirmation with an earlier valid_from still only rules from its own chapter.
    entry.revise(version={"valid_from": 20, "text": "wounded"})
    assert entry.as_of(25)["text"] == "wounded" and entry.as_of(41)["text"] == "dead"
    # Same valid_from: the later confirmation wins.
    entry.revise(version={"valid_from": 20, "text": "healed"})
    assert entry.as_of(20)["text"] == "healed"
    assert entry.as_of(0) is None


def test_each_step_ends_where_the_next_in_valid_from_order_begins():
    # Confirmed in this order: from 1, from 40, from 20, from 20 again.
    assert valid_to([1, 40, 20, 20]) == [20, None, 20, 40]
    # The tied earlier confirmation ends where it begins: it is never in force.
    assert valid_to([5, 5]) == [5, None]
    assert valid_to([]) == []


def test_unknown_kinds_are_refused_by_the_domain():
    import pytest

    from canon_ledger.domain.canon import CanonProposal
    from canon_ledger.domain.errors import RuleViolated

    with pytest.raises(RuleViolated) as e:
        CanonProposal.propose(story_id="s", proposal_id="p", kind="spaceship", key="k", name="K", aliases=[],
                              text="", fields={}, tags=[], valid_from=1)
    assert e.value.code == "unknown_canon_kind"


def test_control_fields_are_checked_so_reveals_cannot_leak():
    given(start()).when(propose("p", fields={"hidden_until": "soon"})).then_error(
        "hidden_until_must_be_a_chapter", "fields.hidden_until"
    )
    given(start()).when(
        propose("p", kind="development_chain", key="c", fields={"nodes": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]})
    ).then_error("chain_nodes_must_be_well_formed", "fields.nodes")
    given(start()).when(
        propose("p", kind="development_chain", key="c",
                fields={"nodes": [{"id": "a", "kind": "foreshadow", "text": "x"}, {"id": "b", "text": "y", "hidden_until": 9}]})
    ).then("CanonProposal.Proposed")
