"""The canon ledger: applies commands to the event store, exactly once each.

Idempotency: every command saves a CommandReceipt (id from ``command_id`` within its story or
collection) in the same transaction as its events, so a retry collides on the receipt and
writes nothing; a command that changed nothing saves one too, so its id names it for good.
Concurrency: a save that loses an optimistic-concurrency race raises IntegrityError; the
command is decided again on fresh state, a bounded number of times, then reported as a
conflict. Nothing is silently dropped.

Commands go through one loop (``_apply_batch``): decide a batch into one unit of work, save
it in one transaction, and on a lost race decide again. ``apply`` runs it once per command,
or, ``atomic``, once over all of them. The ledger's other parts hang off it, and callers
use them directly: the log, read in order and watched for appends (``event_log``, an
``event_log.EventLogReader``: the projections' ``EventLog``), the packet records
(``packet_records``, a ``packet_records.PacketRecords``), and the library's storage hooks it
inherits (``repository.LedgerApplication``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from canon_ledger.application.event_log import EventLogReader, LoggedEvent
from canon_ledger.application.packet_records import PacketRecords
from canon_ledger.application.repository import SNAPSHOT_EVERY, LedgerApplication
from canon_ledger.application.results import CommandResult
from canon_ledger.application.unit_of_work import UnitOfWork
from canon_ledger.domain import ids
from canon_ledger.domain.errors import CanonError, RuleViolated
from canon_ledger.domain.packet_log import PacketRecord
from canon_ledger.domain.receipt import CommandReceipt, event_ref, scope_of
from canon_ledger.domain.story import Story
from canon_ledger.domain.tokens import TokenCounter

if TYPE_CHECKING:  # the command models (pydantic) load with the first command applied, not with a read
    from canon_ledger.domain.commands import Command

__all__ = ["SNAPSHOT_EVERY", "CanonLedger", "CommandOrError", "LoggedEvent"]

CommandOrError: TypeAlias = "Command | CanonError"
Batch = Sequence[tuple[int, CommandOrError]]  # (1-based index in the caller's input, command or parse error)


class _Verdicts:
    """What each command of one pass over a batch came to, in batch order.

    ``first`` maps each command id (in its scope) to its first copy in the batch and that copy's result: a
    later copy is never decided, it follows the first (``CanonLedger._copy_verdict``)."""

    __slots__ = ("results", "first", "copies")

    def __init__(self) -> None:
        self.results: list[CommandResult] = []
        self.first: dict[tuple[str, str], tuple[Command, CommandResult]] = {}
        self.copies: set[int] = set()  # indexes of later copies of a command of this batch

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def unsaved(self) -> list[CommandResult]:
        """The results when the pass is not saved. If a command was refused, nothing of the
        batch is written, copies of its commands included: what was to be applied is not."""
        if self.ok:
            return self.results
        return [CommandResult(r.index, "not_applied", r.command_id, r.type)
                if r.status == "applied" or (r.index in self.copies and r.ok) else r
                for r in self.results]

    def saved(self, position: int) -> list[CommandResult]:
        """The results once saved in one transaction: every command applied by it becomes
        visible at the same ``position``."""
        return [CommandResult(r.index, r.status, r.command_id, r.type, position=position)
                if r.status == "applied" else r
                for r in self.results]


class _StoredReceipts:
    """The stored receipts of one batch's commands, in their scopes and from before ids were
    scoped, all read in one go the first time one is asked for: a batch of retries (a re-import)
    reads them together, not one by one, and a batch that needs none reads none."""

    __slots__ = ("_repository", "_batch", "_uow")

    def __init__(self, repository: Any, batch: Batch) -> None:
        self._repository = repository
        self._batch = batch
        self._uow: UnitOfWork | None = None

    def __call__(self) -> UnitOfWork:
        if self._uow is None:
            self._uow = UnitOfWork(self._repository)
            self._uow.prefetch(receipt for _, item in self._batch if not isinstance(item, CanonError)
                               for receipt in (ids.receipt_id(item.command_id, scope_of(item)),
                                               ids.receipt_id(item.command_id)))
        return self._uow


class CanonLedger(LedgerApplication):
    name = "CanonLedger"
    max_attempts = 12
    page_size = 1000  # records per query when walking the log; the library's default of 10 is slower

    def __init__(self, env: Any = None, tokens: TokenCounter | None = None) -> None:
        super().__init__(env)
        self.tokens = tokens  # knowledge commands chunk text by tokens
        self.event_log = EventLogReader(self.recorder, self.mapper, self.page_size)
        self.packet_records = PacketRecords(self)

    def _notify(self, recordings: list[Any]) -> None:
        super()._notify(recordings)
        self.event_log.appended(recordings)

    # -- writing ---------------------------------------------------------------------------
    def apply(self, commands: Iterable[CommandOrError], *, atomic: bool = False) -> list[CommandResult]:
        """Apply commands in order, each in its own transaction, or, ``atomic``, all in one
        (all applied or none). Parse failures may be passed in as ``CanonError``s so results
        line up with input lines; they are reported and change nothing."""
        items = list(enumerate(commands, start=1))
        if atomic:
            return self._apply_batch(items)
        return [result for item in items for result in self._apply_batch([item])]

    def _apply_batch(self, batch: Batch) -> list[CommandResult]:
        """Decide every command of ``batch`` into one unit of work, in order (a later command
        sees an earlier one's unsaved changes), and save what they changed in one transaction;
        if any is refused, nothing. A save that loses a race (IntegrityError) means another
        writer changed the same aggregates, or commands of the batch were applied before:
        their receipts, read at once, say which (``known``), and when that answers every
        command the batch is done. Otherwise, after a back-off, the rest are decided again on
        fresh state, up to ``max_attempts`` saves in all, then reported as a conflict."""
        known: dict[int, CommandResult] = {}  # index -> what its receipt says the command came to
        for attempt in range(self.max_attempts):
            uow = UnitOfWork(self.repository)
            verdicts = self._decide_batch(batch, uow, known)
            pending = uow.pending() if verdicts.ok else []
            if not pending:
                return verdicts.unsaved()
            try:
                recordings = self.save(*pending)
            except IntegrityError:
                known = self._receipt_verdicts(batch)
                if all(first.index in known for _, first in verdicts.first.values()):
                    # Every command was applied before: nothing is left to decide or to save.
                    return self._decide_batch(batch, UnitOfWork(self.repository), known).unsaved()
                self._back_off(attempt)
                continue
            return verdicts.saved(max(r.notification.id for r in recordings))
        return [self._conflict(index, item) if not isinstance(item, CanonError)
                else CommandResult(index, "rejected", error=item)
                for index, item in batch]

    def _decide_batch(self, batch: Batch, uow: UnitOfWork, known: dict[int, CommandResult]) -> _Verdicts:
        """One pass: each command decided into ``uow`` unless ``known`` answers it already. The
        aggregates the commands name are loaded together first (``_named``)."""
        uow.prefetch(self._named(batch, known))
        receipts = _StoredReceipts(self.repository, batch)
        verdicts = _Verdicts()
        for index, item in batch:
            if isinstance(item, CanonError):
                verdicts.results.append(CommandResult(index, "rejected", error=item))
                continue
            twin = verdicts.first.get((scope_of(item), item.command_id))
            if twin is not None:
                verdicts.copies.add(index)
                verdicts.results.append(self._copy_verdict(index, item, *twin))
                continue
            result = known[index] if index in known else self._verdict(index, item, uow, receipts)
            verdicts.results.append(result)
            verdicts.first[(scope_of(item), item.command_id)] = (item, result)
        return verdicts

    @staticmethod
    def _named(batch: Batch, known: dict[int, CommandResult]) -> list[UUID]:
        """The aggregates named by the commands of ``batch`` that ``known`` does not answer
        (``handlers.reads``), and for a command of no story the receipt its id had before ids
        were scoped (``_unscoped_verdict`` reads it)."""
        from canon_ledger.application.handlers import reads

        named: list[UUID] = []
        for index, item in batch:
            if isinstance(item, CanonError) or index in known:
                continue
            named += reads(item)
            if getattr(item, "story_id", None) is None:
                named.append(ids.receipt_id(item.command_id))
        return named

    def _verdict(self, index: int, command: Command, uow: UnitOfWork, receipts: _StoredReceipts) -> CommandResult:
        """Decide ``command`` into ``uow``: applied (once saved), unchanged, or refused. The
        receipt is only read (``receipts``) when something goes wrong: on the happy path its
        unique (id, version 1) row already makes a second save of the same command fail. (In a
        story started before ids were scoped, a receipt from then is read first: its row is another.)"""
        if self._may_have_unscoped_receipt(command, uow):
            earlier = self._unscoped_verdict(index, command, uow)
            if earlier is not None:
                return earlier
        try:
            changed = self._decide(command, uow)
        except CanonError as e:
            # A retry can be refused by its own earlier success ("chapter already planned").
            earlier = self._receipt_verdict(index, command, receipts())
            return earlier or CommandResult(index, "rejected", command.command_id, command.type, error=e)
        if changed:
            return CommandResult(index, "applied", command.command_id, command.type)
        # A retry of a command applied before changes nothing now: it is a duplicate.
        earlier = self._receipt_verdict(index, command, receipts())
        if earlier is not None:
            return earlier
        self._add_receipt(command, uow, [])  # its id now names this command, though it changed nothing
        return CommandResult(index, "unchanged", command.command_id, command.type)

    def _receipt_verdicts(self, batch: Batch) -> dict[int, CommandResult]:
        """index -> verdict, for each first copy of a command of ``batch`` that has a receipt."""
        uow = _StoredReceipts(self.repository, batch)()
        seen: set[tuple[str, str]] = set()
        found: dict[int, CommandResult] = {}
        for index, item in batch:
            if isinstance(item, CanonError) or (scope_of(item), item.command_id) in seen:
                continue
            seen.add((scope_of(item), item.command_id))
            earlier = self._receipt_verdict(index, item, uow)
            if earlier is not None:
                found[index] = earlier
        return found

    def _copy_verdict(self, index: int, command: Command, twin: Command, first: CommandResult) -> CommandResult:
        """A later copy of a command id seen earlier in the batch: a duplicate of what the first
        copy did, or refused as it was (a copy of a refused command is never a ``duplicate``)."""
        if twin.digest() != command.digest():
            return self._reused(index, command, twin.type)
        if first.ok:
            return CommandResult(index, "duplicate", command.command_id, command.type)
        code, message = (first.error.code, first.error.message) if first.error else (first.status, first.status)
        field = first.error.field if first.error else None
        return CommandResult(index, "rejected", command.command_id, command.type,
                             error=CanonError(code, f"a copy of command {first.index} of this batch, which was "
                                                    f"refused: {message}", field))

    def _decide(self, command: Command, uow: UnitOfWork) -> bool:
        """Decide ``command`` into ``uow`` with its receipt; False when it changes nothing."""
        from canon_ledger.application.handlers import handle

        uow.begin()
        handle(command, uow, self.tokens)
        produced = [event_ref(e.originator_id, e.originator_version) for e in uow.produced()]
        if not produced:
            return False  # it changes nothing (its outcome is the state already)
        self._add_receipt(command, uow, produced)
        return True

    @staticmethod
    def _add_receipt(command: Command, uow: UnitOfWork, produced: list[str]) -> None:
        uow.add(CommandReceipt(command_id=command.command_id, command_type=command.type,
                               story_id=getattr(command, "story_id", None), digest=command.digest(),
                               events=produced, scope=scope_of(command)))

    @staticmethod
    def _may_have_unscoped_receipt(command: Command, uow: UnitOfWork) -> bool:
        """Could ``command``'s id have a receipt from before ids were scoped? Only in a story
        started before then (``Story.receipts_scoped``), or for a knowledge command."""
        story_id = getattr(command, "story_id", None)
        if story_id is None:
            return True
        story = uow.get(Story, ids.story_id(story_id))
        return story is not None and not getattr(story, "receipts_scoped", False)

    @staticmethod
    def _unscoped_verdict(index: int, command: Command, uow: UnitOfWork) -> CommandResult | None:
        """What a receipt of ``command``'s id from before ids were scoped says, if that receipt
        is of the same story (or, like it, of no story): one of another story is none of this
        command's business, and never named to it."""
        receipt = uow.get(CommandReceipt, ids.receipt_id(command.command_id))
        if receipt is None or receipt.story_id != getattr(command, "story_id", None):
            return None
        return CanonLedger._receipt_answer(index, command, receipt)

    @staticmethod
    def _receipt_verdict(index: int, command: Command, uow: UnitOfWork) -> CommandResult | None:
        """What an earlier receipt of ``command``'s id says it came to, or None: the receipt in
        its scope, else one from before ids were scoped (``_unscoped_verdict``)."""
        receipt = uow.get(CommandReceipt, ids.receipt_id(command.command_id, scope_of(command)))
        if receipt is None:
            return CanonLedger._unscoped_verdict(index, command, uow)
        return CanonLedger._receipt_answer(index, command, receipt)

    @staticmethod
    def _receipt_answer(index: int, command: Command, receipt: CommandReceipt) -> CommandResult:
        if receipt.digest != command.digest():
            return CanonLedger._reused(index, command, receipt.command_type)
        return CommandResult(index, "duplicate", command.command_id, command.type)

    @staticmethod
    def _reused(index: int, command: Command, earlier_type: str) -> CommandResult:
        error = RuleViolated(
            "command_id_must_identify_one_command",
            f"command_id {command.command_id!r} was already used by a different {earlier_type} command",
            "command_id",
        )
        return CommandResult(index, "rejected", command.command_id, command.type, error=error)

    def _conflict(self, index: int, command: Command) -> CommandResult:
        error = CanonError(
            "concurrency_conflict",
            f"gave up after {self.max_attempts} attempts: other writers kept changing the same aggregates; "
            "nothing was written, retry the command",
        )
        return CommandResult(index, "conflict", command.command_id, command.type, error=error)

    @staticmethod
    def _back_off(attempt: int) -> None:
        time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))
