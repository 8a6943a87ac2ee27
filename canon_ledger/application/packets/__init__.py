"""Context packets: a worker's token-budgeted view of confirmed canon (L0), with L1 retrieval
when the budget leaves room. ``recipes`` declares what each role reads, each read naming its
source (``sources``: what it reads, through ``reading`` and the port reads of ``fetches``);
``compiler`` packs it within the budget, ``packet`` is the JSON contract and its hash,
``service`` records what was issued, ``replay`` rebuilds a packet with the compiler version that
built it (the audit), the earlier versions frozen in ``frozen``."""
