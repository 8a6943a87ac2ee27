"""The global log's order on PostgreSQL: no reader ever sees a position past one that is
still uncommitted (after Marten's gap test).

A notification id is drawn from a sequence when a row is inserted, not when it commits. Two
writers that draw N and N+1 can commit in the other order; a reader tailing the log by
position then sees N+1 while N is invisible, moves its cursor past N, and never reads N.
The library prevents this by taking ``LOCK TABLE ... IN EXCLUSIVE MODE`` before every insert,
so ids are handed out and committed one transaction at a time. The first test shows the lock
at work through ``CanonLedger.apply``; the controls show, on a bare BIGSERIAL table, the gap
that appears without it (so this file can detect one) and that the same lock removes it.

Transactions are held open for well under the library's 5 s
idle_in_transaction_session_timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest
from eventsourcing.postgres import PostgresApplicationRecorder
from sqlalchemy.engine import make_url

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command
from canon_ledger.application.results import CommandResult
from canon_ledger.infrastructure.stores import open_ledger

pytestmark = pytest.mark.postgres

HOLD_LIMIT = 3.5  # seconds; the library's idle-in-transaction timeout is 5 s
EVENTS_TABLE = "canonledger_events"


def _libpq(url: str) -> str:
    """A psycopg connection string for a SQLAlchemy-style URL (``postgresql+psycopg://`` too)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _cmd(**fields: Any) -> Any:
    return parse_command(fields)


def _start_story(story: str) -> Any:
    return _cmd(type="start_story", command_id=f"{story}-start", story_id=story, title=story.title(),
                style_guardrails=[], output_contract="md")


def _plan_chapter(story: str, chapter: int) -> Any:
    return _cmd(type="plan_chapter", command_id=f"{story}-ch{chapter}", story_id=story, chapter=chapter,
                volume=1, goals=[])


@pytest.fixture
def ledgers(pg_url: str) -> Iterator[Callable[[], CanonLedger]]:
    """Independent CanonLedger instances on one scratch database (own pools, as separate
    service processes would have); all closed at the end."""
    opened: list[CanonLedger] = []

    def open_one() -> CanonLedger:
        ledger = open_ledger(pg_url)
        assert isinstance(ledger.recorder, PostgresApplicationRecorder)
        assert ledger.recorder.events_table_name == EVENTS_TABLE
        opened.append(ledger)
        return ledger

    try:
        yield open_one
    finally:
        for ledger in opened:
            ledger.close()


class _TailingReader(threading.Thread):
    """Follows the global log the way a projection does: page from the last position seen,
    exclusive, forever. Whatever it skips is lost to it for good."""

    def __init__(self, ledger: CanonLedger) -> None:
        super().__init__(daemon=True)
        self.ledger = ledger
        self.seen: list[int] = []
        self.errors: list[BaseException] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        last = 0
        try:
            while not self._stop_event.is_set():
                page = self.ledger.recorder.select_notifications(last, 1000, inclusive_of_start=False)
                self.seen.extend(n.id for n in page)
                if page:
                    last = page[-1].id
                time.sleep(0.005)
        except BaseException as e:  # noqa: BLE001 - surfaced by the test
            self.errors.append(e)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


def _locks_on(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, bool]]:
    """(mode, granted) of every lock on ``table`` in this database."""
    rows = conn.execute(
        "SELECT l.mode, l.granted FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE c.relname = %s AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (table,),
    ).fetchall()
    return [(mode, granted) for mode, granted in rows]


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def _positions(ledger: CanonLedger) -> list[int]:
    return [n.id for n in ledger.recorder.select_notifications(1, 100_000)]


def test_a_later_command_waits_for_an_uncommitted_insert_and_readers_never_see_past_it(
    pg_url: str, ledgers: Callable[[], CanonLedger]
) -> None:
    holder, writer, reader = ledgers(), ledgers(), ledgers()

    # Some committed history first, so the held insert is not at position 1.
    assert [r.status for r in writer.apply([_start_story("s1"), _plan_chapter("s1", 1)])] == ["applied", "applied"]
    base = reader.event_log.position()
    assert base > 0 and _positions(reader) == list(range(1, base + 1))

    # The holder applies a command through CanonLedger.apply -> Application.save ->
    # PostgresApplicationRecorder.insert_events, unchanged, except that the transaction is
    # held open right after the INSERT has returned its notification ids (table lock taken,
    # ids assigned, nothing committed).
    recorder = holder.recorder
    assert isinstance(recorder, PostgresApplicationRecorder)
    fetch_ids = recorder._fetch_ids_after_insert_events
    held_ids: list[int] = []
    held, release = threading.Event(), threading.Event()
    held_at: list[float] = []

    def fetch_ids_then_hold(curs: Any, stored_events: Sequence[Any], **kwargs: Any) -> Sequence[int] | None:
        ids = fetch_ids(curs, stored_events, **kwargs)
        if not held.is_set():
            held_ids.extend(ids or ())
            held_at.append(time.monotonic())
            held.set()
            release.wait(timeout=HOLD_LIMIT)  # never past the idle-in-transaction timeout
        return ids

    recorder._fetch_ids_after_insert_events = fetch_ids_then_hold  # type: ignore[method-assign]

    results: dict[str, list[CommandResult]] = {}
    finished_at: dict[str, float] = {}
    errors: list[BaseException] = []

    def run(name: str, ledger: CanonLedger, commands: list[Any]) -> None:
        try:
            results[name] = ledger.apply(commands)
            finished_at[name] = time.monotonic()
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    tail = _TailingReader(reader)
    tail.start()
    first = threading.Thread(target=run, args=("held", holder, [_start_story("held")]), daemon=True)
    later = threading.Thread(target=run, args=("later", writer, [_plan_chapter("s1", 2)]), daemon=True)
    try:
        first.start()
        assert held.wait(timeout=5), f"the held insert never got its ids: {errors}"
        assert held_ids and held_ids == list(range(base + 1, base + 1 + len(held_ids))), (base, held_ids)

        with psycopg.connect(_libpq(pg_url), autocommit=True) as probe:
            # The holder has the EXCLUSIVE table lock and is idle in its transaction.
            assert ("ExclusiveLock", True) in _locks_on(probe, EVENTS_TABLE)

            # A later command, started now, must queue behind the lock, not commit ahead.
            later.start()
            blocked = _wait_for(lambda: ("ExclusiveLock", False) in _locks_on(probe, EVENTS_TABLE), 2.0)
            assert blocked, f"the later writer never waited for the table lock: {_locks_on(probe, EVENTS_TABLE)}"
            assert later.is_alive() and "later" not in results

            # While the held insert is open, no read of the global log goes past it.
            observe_until = time.monotonic() + 0.3
            while time.monotonic() < observe_until:
                assert reader.event_log.position() == base
                assert _positions(reader) == list(range(1, base + 1))
                assert max(e.position for e in reader.event_log.history()) == base
                time.sleep(0.02)
            assert all(p <= base for p in tail.seen), tail.seen
            assert later.is_alive() and "later" not in results, "the later command committed ahead of the held one"

            held_for = time.monotonic() - held_at[0]
            assert held_for < HOLD_LIMIT, f"held the transaction {held_for:.2f}s: too close to the 5 s timeout"
            released_at = time.monotonic()
            release.set()

            first.join(timeout=10)
            later.join(timeout=35)  # the later writer's lock_timeout is 30 s
            assert not first.is_alive() and not later.is_alive()
            assert not errors, errors
            # Nobody holds or waits for the insert lock any more (readers' ACCESS SHARE aside).
            assert not [lock for lock in _locks_on(probe, EVENTS_TABLE) if lock[0] == "ExclusiveLock"]
    finally:
        release.set()
        first.join(timeout=10)
        if later.ident is not None:  # started
            later.join(timeout=35)
        tail_seen_ok = _wait_for(lambda: len(tail.seen) >= reader.event_log.position(), 2.0)
        tail.stop()

    [held_result], [later_result] = results["held"], results["later"]
    assert held_result.status == "applied" and later_result.status == "applied", (held_result, later_result)
    assert held_result.position == max(held_ids)
    assert finished_at["later"] >= released_at, "the later command finished before the held one was released"
    assert later_result.position is not None and later_result.position > max(held_ids)

    # Committed in order: one gap-free sequence, the held command's events first.
    end = reader.event_log.position()
    assert end == later_result.position
    assert _positions(reader) == list(range(1, end + 1))
    history = list(reader.event_log.history())
    assert [e.position for e in history] == list(range(1, end + 1))
    held_events = [e for e in history if e.position in held_ids]
    assert {e.story_id for e in held_events} == {"held"}
    assert {e.story_id for e in history if e.position > max(held_ids)} == {"s1"}

    # The tailing reader, polling throughout, got every position exactly once, in order.
    assert not tail.errors, tail.errors
    assert tail_seen_ok and tail.seen == list(range(1, end + 1)), tail.seen


# -- controls: the hazard on a bare identity column, and the lock that removes it -------------------
@pytest.fixture
def probe_table(pg_url: str) -> Iterator[str]:
    dsn = _libpq(pg_url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE gap_probe (id BIGSERIAL PRIMARY KEY, label text NOT NULL)")
    yield dsn


def _ids(conn: psycopg.Connection[Any], after: int = 0) -> list[int]:
    return [row[0] for row in conn.execute("SELECT id FROM gap_probe WHERE id > %s ORDER BY id", (after,))]


def test_control_without_a_table_lock_a_reader_sees_n_plus_1_while_n_is_invisible(probe_table: str) -> None:
    with (
        psycopg.connect(probe_table) as first,
        psycopg.connect(probe_table) as later,
        psycopg.connect(probe_table, autocommit=True) as reader,
    ):
        with first.transaction():
            [n] = first.execute("INSERT INTO gap_probe (label) VALUES ('first') RETURNING id").fetchone()
            # Started later, committed first: nothing orders it behind `first`.
            with later.transaction():
                [m] = later.execute("INSERT INTO gap_probe (label) VALUES ('later') RETURNING id").fetchone()
            assert m == n + 1

            # The gap: N+1 is visible, N is not.
            visible = _ids(reader)
            assert visible == [n + 1], visible
            cursor = max(visible)  # a tailing reader advances past N here

        # N commits afterwards: the table is complete...
        assert _ids(reader) == [n, n + 1]
        # ...but a reader that pages by position from where it was never sees N.
        assert _ids(reader, after=cursor) == []


def test_control_with_the_exclusive_table_lock_the_later_writer_cannot_commit_first(probe_table: str) -> None:
    # The same race with the library's lock statement: the later writer cannot even get its id.
    lock = "LOCK TABLE gap_probe IN EXCLUSIVE MODE"
    with (
        psycopg.connect(probe_table) as first,
        psycopg.connect(probe_table) as later,
        psycopg.connect(probe_table, autocommit=True) as reader,
    ):
        with first.transaction():
            first.execute(lock)
            [n] = first.execute("INSERT INTO gap_probe (label) VALUES ('first') RETURNING id").fetchone()
            with pytest.raises(psycopg.errors.LockNotAvailable), later.transaction():
                later.execute("SET LOCAL lock_timeout = '200ms'")
                later.execute(lock)
                later.execute("INSERT INTO gap_probe (label) VALUES ('later')")
            assert _ids(reader) == []  # nothing visible past (or at) the uncommitted N
        with later.transaction():
            later.execute(lock)
            [m] = later.execute("INSERT INTO gap_probe (label) VALUES ('later') RETURNING id").fetchone()
        assert m == n + 1
        assert _ids(reader) == [n, n + 1]
