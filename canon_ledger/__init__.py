"""Canon Ledger: event-sourced canon and token-budgeted context packets for long-form fiction.

Every importable module lives under this one name (``canon_ledger.domain``,
``canon_ledger.application``, ``canon_ledger.projections``, ``canon_ledger.infrastructure``).
Events stored before the package had this name carry topics such as
``domain.story:Story.Started``; ``canon_ledger.domain.topics`` registers the old package names with
the event store library so that those events keep resolving to the same classes.
"""

from canon_ledger.domain import topics as _topics

_topics.register_legacy_packages()
