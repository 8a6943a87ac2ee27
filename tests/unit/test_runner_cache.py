"""What a runner may conclude about the log without reading it (``projections.runner_cache``)."""

from __future__ import annotations

from canon_ledger.projections.runner_cache import LogMemory, QuietRange, follows

CANON = ["canon.Established"]


def quiet(after: int, last: int) -> QuietRange:
    q = QuietRange()
    q.note(after, last)
    return q


def test_a_build_at_or_past_the_range_start_reflects_its_end() -> None:
    q = quiet(10, 15)
    assert q.reflects(10, 15) and q.reflects(12, 14) and q.reflects(20, 20)
    assert not q.reflects(9, 15)  # (9, 10] was never checked
    assert not q.reflects(10, 16)  # nor was position 16


def test_touching_ranges_join_and_a_later_one_replaces_an_earlier() -> None:
    q = quiet(10, 15)
    q.note(15, 18)
    assert (q.after, q.last) == (10, 18)
    q.note(3, 12)
    assert (q.after, q.last) == (3, 18)
    q.note(30, 30)  # caught up to 30 by writing: nothing known past it
    assert (q.after, q.last) == (30, 30)
    q.note(1, 5)  # an older fact does not take its place
    assert (q.after, q.last) == (30, 30)


def test_appended_foreign_events_right_after_the_range_extend_it_and_nothing_else_does() -> None:
    q = quiet(10, 15)
    q.appended([(16, "packets.PacketIssued")], CANON)
    q.appended([(17, "kb.Ingested"), (18, "kb.Ingested")], CANON)
    assert q.last == 18 and q.reflects(10, 18)
    for events in ([(19, "canon.Established")], [(20, "kb.Ingested")], [(19, "kb.Ingested"), (21, "kb.Ingested")], []):
        q.appended(events, CANON)
        assert q.last == 18, events


def test_follows_means_the_very_next_positions() -> None:
    assert follows([(4,), (5,)], 3) and not follows([(5,)], 3) and not follows([(4,), (6,)], 3) and not follows([], 3)


def _appended(start: int, *topics: str) -> list[tuple[int, str, str]]:
    return [(start + i, t, f"record:{start + i}") for i, t in enumerate(topics)]


def test_the_projections_own_appends_are_held_until_projected() -> None:
    memory = LogMemory(CANON, limit=10)
    memory.caught_up(2)
    memory.appended(_appended(3, "packets.PacketIssued", "canon.Established", "kb.Ingested"))  # 3, 4, 5
    assert memory.own is not None and (memory.own.after, memory.own.last) == (2, 5)
    assert memory.events_between(2, 5, str.upper) == [(4, "RECORD:4")]
    assert memory.events_between(1, 5, str.upper) is None  # (1, 2] was never seen
    assert memory.events_between(2, 6, str.upper) is None  # nor was position 6
    memory.caught_up(4)
    assert memory.own is not None and memory.own.records == [] and memory.events_between(4, 5, str) == []
    memory.caught_up(5)
    assert memory.own is None and memory.reflected_up_to == 5
    memory.appended(_appended(6, "kb.Ingested"))
    assert memory.reflected_up_to == 6 and memory.reflects(5, 6)


def test_appends_that_do_not_follow_what_it_knew_teach_nothing() -> None:
    memory = LogMemory(CANON, limit=10)
    memory.caught_up(2)
    memory.appended(_appended(4, "canon.Established"))  # 3 was someone else's
    assert memory.own is None and memory.reflected_up_to == 2
    memory.appended(_appended(3, "canon.Established"))
    memory.appended(_appended(5, "canon.Established"))  # 4 by another process: not held, the rest kept
    assert memory.own is not None and memory.own.last == 3


def test_more_own_appends_than_the_limit_are_forgotten() -> None:
    memory = LogMemory(CANON, limit=2)
    for position in (1, 2, 3):
        memory.appended(_appended(position, "canon.Established"))
    assert memory.own is None and memory.events_between(0, 3, str) is None


def test_a_quiet_read_moves_the_range_and_spends_what_it_covers() -> None:
    memory = LogMemory(CANON, limit=10)
    memory.caught_up(2)
    memory.appended(_appended(3, "kb.Ingested", "canon.Established"))  # 3, 4
    memory.quiet_between(2, 3)
    assert memory.reflects(2, 3) and memory.own is not None and memory.own.after == 3
    assert memory.events_between(3, 4, str) == [(4, "record:4")]
