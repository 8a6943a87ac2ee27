"""What a read model may conclude about the log without reading it (``projections.runner.Quiet``)."""

from __future__ import annotations

from projections.runner import Quiet

CANON = ["canon.Established"]


def quiet(p: int, g: int) -> Quiet:
    q = Quiet()
    q.note(p, g)
    return q


def test_a_build_at_or_past_the_range_start_reflects_its_end() -> None:
    q = quiet(10, 15)
    assert q.reflects(10, 15) and q.reflects(12, 14) and q.reflects(20, 20)
    assert not q.reflects(9, 15)  # (9, 10] was never checked
    assert not q.reflects(10, 16)  # nor was position 16


def test_touching_ranges_join_and_a_later_one_replaces_an_earlier() -> None:
    q = quiet(10, 15)
    q.note(15, 18)
    assert (q.p, q.g) == (10, 18)
    q.note(3, 12)
    assert (q.p, q.g) == (3, 18)
    q.note(30, 30)  # caught up to 30 by writing: nothing known past it
    assert (q.p, q.g) == (30, 30)
    q.note(1, 5)  # an older fact does not take its place
    assert (q.p, q.g) == (30, 30)


def test_appended_foreign_events_right_after_the_range_extend_it() -> None:
    q = quiet(10, 15)
    q.appended([(16, "packets.PacketIssued")], CANON)
    q.appended([(17, "kb.Ingested"), (18, "kb.Ingested")], CANON)
    assert q.g == 18 and q.reflects(10, 18)


def test_appended_events_of_ours_a_gap_or_a_hole_extend_nothing() -> None:
    for events in ([(16, "canon.Established")],  # ours: the model must project it
                   [(17, "packets.PacketIssued")],  # position 16 is unaccounted for
                   [(16, "kb.Ingested"), (18, "kb.Ingested")],  # a hole inside the batch
                   [(16, "kb.Ingested"), (17, "canon.Established")],
                   []):
        q = quiet(10, 15)
        q.appended(events, CANON)
        assert q.g == 15, events


def test_the_same_facts_twice_change_nothing() -> None:
    q = quiet(10, 15)
    q.note(10, 15)
    q.appended([(16, "packets.PacketIssued")], CANON)
    q.note(10, 16)
    assert (q.p, q.g) == (10, 16)
