"""Use cases over the domain, with ports for everything outside: applying commands
(``ledger``: decide, save with the receipt, retry; ``handlers``: one per command), context
packets (``packets``: recipes, compiler, replay), audits, L1 retrieval (``retrieval``), the
knowledge layer (``knowledge``: wiki pages within an LLM quota), summaries, manuscript and
lorebook import and export, the continuity check and who-knows-what; and what every door
shares: reading commands from JSON (``command_reader``) and what a key may see and do
(``access``). No SQL and no network:
the stores, read models and providers come in through the ports each package declares
(``ports`` for the top-level use cases; ``packets.ports``, ``retrieval.ports``, ``knowledge.ports``)."""
