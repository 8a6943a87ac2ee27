"""A runner's memory of the log in use: its own appends projected without reading them back, and
the cases that fall back to the log (the ranges themselves: ``test_runner_cache.py``)."""

from __future__ import annotations

from canon_ledger.projections.runner_cache import QuietRange

CANON = ["canon.Established"]


def quiet(p: int, g: int) -> QuietRange:
    q = QuietRange()
    q.note(p, g)
    return q


def test_appended_events_of_ours_a_gap_or_a_hole_extend_nothing() -> None:
    for events in ([(16, "canon.Established")],  # ours: the model must project it
                   [(17, "packets.PacketIssued")],  # position 16 is unaccounted for
                   [(16, "kb.Ingested"), (18, "kb.Ingested")],  # a hole inside the batch
                   [(16, "kb.Ingested"), (17, "canon.Established")],
                   []):
        q = quiet(10, 15)
        q.appended(events, CANON)
        assert q.last == 15, events


def test_the_same_facts_twice_change_nothing() -> None:
    q = quiet(10, 15)
    q.note(10, 15)
    q.appended([(16, "packets.PacketIssued")], CANON)
    q.note(10, 16)
    assert (q.after, q.last) == (10, 16)


# -- the tail: the projection's own events this process appended (``ProjectionRunner``) ----------
class _Log:
    """A log of (position, topic); ``read`` counts its calls, ``decode`` tags what it decoded."""

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        self.reads = 0

    def position(self) -> int:
        return len(self.topics)

    def read(self, start, limit, stop, topics):  # noqa: ANN001, ANN201
        self.reads += 1
        stop = len(self.topics) if stop is None else stop
        return [(p, f"read:{p}") for p in range(start, stop + 1) if self.topics[p - 1] in topics][:limit]

    def watch(self, listener) -> None:  # noqa: ANN001
        pass

    def decode(self, record):  # noqa: ANN001, ANN201
        return f"memory:{record}"

    def append(self, runner, *topics: str) -> None:  # noqa: ANN001
        start = len(self.topics)
        self.topics += topics
        runner.appended([(start + i, t, start + i) for i, t in enumerate(topics, start=1)])


class _Projection:
    name = "spec"
    topics = CANON

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def ops(self, events, conn=None):  # noqa: ANN001, ANN201
        self.seen += events
        return []


def _runner(log: _Log, page_size: int = 1000):  # noqa: ANN202
    from contextlib import contextmanager

    from canon_ledger.projections.runner import ProjectionRunner

    class _Runner(ProjectionRunner):
        tracked_at = 0

        def position(self) -> int:
            return self.tracked_at

        def step(self, conn, goal, prefetched=None, *, careful=False):  # noqa: ANN001, ANN201 - the page, no SQL
            position = self.tracked_at
            page = prefetched[1] if prefetched and prefetched[0] == position else self.log.read(
                position + 1, self.page_size, goal, self.projection.topics)
            self.projection.ops(page)
            self.tracked_at = page[-1][0] if len(page) == self.page_size else goal
            return self.tracked_at

    @contextmanager
    def begin():  # noqa: ANN202
        yield None

    r = _Runner(_Projection(), "spec:t", log, None, None, page_size)  # type: ignore[arg-type]
    r.write_engine = type("E", (), {"begin": staticmethod(begin)})()
    return r


def test_the_projections_own_appended_events_are_projected_without_reading_the_log() -> None:
    log = _Log(["canon.Established", "kb.Ingested"])
    r = _runner(log)
    r.catch_up()
    assert log.reads == 1 and r.memory.quiet.last == 2
    log.append(r, "packets.PacketIssued", "canon.Established", "kb.Ingested")  # 3, 4, 5
    log.append(r, "canon.Established")  # 6
    assert r.catch_up(5) == 5 and log.reads == 1
    assert r.projection.seen[-1] == (4, "memory:4")
    assert r.catch_up() == 6 and log.reads == 1 and r.projection.seen[-1] == (6, "memory:6")
    assert r.memory.own is None and r.memory.quiet.last == 6  # the tail is spent; appends extend the quiet range again
    log.append(r, "kb.Ingested")
    assert r.memory.quiet.last == 7


def test_a_gap_before_the_tail_or_inside_it_falls_back_to_the_log() -> None:
    log = _Log(["canon.Established"])
    r = _runner(log)
    r.catch_up()
    log.topics.append("canon.Established")  # 2: another process wrote, this one was not told
    log.append(r, "canon.Established")  # 3 does not follow what this process knew (1)
    assert r.memory.own is None
    r.catch_up()
    assert log.reads == 2 and r.projection.seen[-2:] == [(2, "read:2"), (3, "read:3")]
    log.append(r, "canon.Established")  # 4: a tail
    log.topics.append("canon.Established")  # 5 by another process
    log.append(r, "canon.Established")  # 6: not after the tail's end: not held, tail kept
    assert r.memory.own is not None and r.memory.own.last == 4
    assert r.catch_up(4) == 4 and log.reads == 2  # inside the tail: from memory
    r.catch_up()
    assert log.reads == 3 and [p for p, _ in r.projection.seen[-2:]] == [5, 6]


def test_a_tail_longer_than_a_page_is_dropped_and_the_log_read() -> None:
    log = _Log(["canon.Established"])
    r = _runner(log, page_size=2)
    r.catch_up()
    for _ in range(3):
        log.append(r, "canon.Established")
    assert r.memory.own is None
    r.catch_up()
    assert [p for p, _ in r.projection.seen] == [1, 2, 3, 4] and all(e.startswith("read") for _, e in r.projection.seen)
