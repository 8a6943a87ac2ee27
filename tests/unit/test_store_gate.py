"""The door's store gate: given faults and probes, when it answers 503 at once and when it
lets requests through again (a clock of the test's own)."""

from __future__ import annotations

import pytest
from psycopg_pool import PoolTimeout

from canon_ledger.infrastructure.http.door import PROBE, StoreGate


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_fault_opens_the_gate_until_a_probe_comes_back_clean() -> None:
    clock = Clock()
    gate = StoreGate(clock)
    assert gate.admit() == -1  # closed: every request goes through, none is a probe
    gate.failed()
    assert gate.down and gate.admit() is None  # answered at once
    clock.now += StoreGate.PROBE_EVERY
    probe = gate.admit()
    assert probe is not None and probe >= 0
    assert gate.admit() is None  # one probe a second, not every request
    gate.failed()  # the probe met the store down again
    gate.done(probe)
    assert gate.down
    clock.now += StoreGate.PROBE_EVERY
    probe = gate.admit()
    assert probe is not None
    gate.done(probe)  # no fault since it was admitted: the store is back
    assert not gate.down and gate.admit() == -1


def test_with_a_listener_a_probe_goes_only_while_it_is_connected_and_its_return_closes_the_gate() -> None:
    clock = Clock()
    gate = StoreGate(clock)
    connected = [False]
    gate.listener = lambda: connected[0]
    gate.failed()
    clock.now += 10 * StoreGate.PROBE_EVERY
    assert gate.admit() is None  # the listener cannot reach the store: no probe
    connected[0] = True
    assert gate.admit() is not None  # a fault while the listener is fine (a lock timeout): probed
    gate.failed()
    gate.recovered()  # the listener reconnected
    assert not gate.down


class Pool:
    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.asked = 0

    def getconn(self, timeout: float | None = None) -> str:
        self.asked += 1
        if self.fails:
            raise PoolTimeout("couldn't get a connection after 5.00 sec")
        return "connection"


def test_the_pool_refuses_at_once_while_the_gate_is_open_except_for_the_probe() -> None:
    gate = StoreGate(Clock())
    pool = Pool(fails=True)
    gate.fail_fast(pool)
    with pytest.raises(PoolTimeout):
        pool.getconn()
    assert gate.down and pool.asked == 1  # its timeout opened the gate
    with pytest.raises(PoolTimeout):
        pool.getconn()
    assert pool.asked == 1  # refused without waiting on the pool
    pool.fails = False
    token = PROBE.set(True)
    try:
        assert pool.getconn() == "connection" and pool.asked == 2  # the probe waits as usual
    finally:
        PROBE.reset(token)
