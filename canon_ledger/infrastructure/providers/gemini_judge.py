"""The continuity check's LLM ceiling (``canon check --provider gemini``): one metered
Gemini call reviews a draft against an evidence table, and its findings join the rules'.

What is sent: the draft's text and the evidence table, built only from the ``steps`` the check
read (the entries the draft names, each step labelled with where it stands at the draft's
chapter: in force, earlier, later, hidden, retired), never the whole canon; the rules' findings
too, so the model does not repeat them. What comes back: findings in the report's schema
(structured output, ``FindingsSchema``), validated here:

- a finding's span is the draft's own: offsets are Python string indices (code points, end
  exclusive); when ``draft[start:end]`` is not the span's ``text`` (models count characters
  loosely), the span moves to the occurrence of that text nearest the given start; a text the
  draft does not hold drops the finding;
- its entry must be one of the table's (its name is the table's); its evidence is rebuilt from
  the table's steps by ``source`` (the model's copy of their text is not trusted), and a finding
  citing no step of the table is dropped;
- its type is the model's, prefixed ``llm:`` (``llm:field_conflict``), so it never passes for a
  rule's; its id is ``continuity_rules.finding_id`` of that type, the entry, the span and the
  evidence positions: stable for the same draft and canon;
- one that repeats a rule's finding (same type, same entry, overlapping span) is left out.

The quota: one generate call reserved in the quota ledger per review through
``knowledge.compile.metered_call`` (provider ``gemini``, purpose ``continuity:<story>/<draft>``,
within ``QuotaPolicy.continuity_per_day``); a 5xx is retried there, each retry its own
reservation. The validated answer is cached (``infrastructure.judge_cache``) under a digest of
the model, the story, the draft, its chapter, the draft text's hash and the canon position of
each step sent: asking again costs no call, and a changed draft or a new canon event about an
entry the draft names is a new question. Nothing is asked for a draft that names no entry.

Failures raise, and ``application.continuity.ContinuityCheck._judged`` falls back to the
rules' findings, saying why in ``stages``: a refused reservation or a 429 (``StopBatch``), a 5xx
after the retries, an answer that is not JSON or not the schema (``ProviderError``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from canon_ledger.application.knowledge.compile import metered_call
from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.application.knowledge.quota import Quota
from canon_ledger.application.packets.ports import DraftView
from canon_ledger.domain.canon_rules import hidden_at
from canon_ledger.domain.continuity import Evidence, Finding, Step
from canon_ledger.domain.continuity_rules import VOCABULARY_ENTRY, finding_id
from canon_ledger.domain.quota import GENERATE
from canon_ledger.infrastructure.judge_cache import SqlJudgeCache
from canon_ledger.infrastructure.providers.gemini import GENERATE_MODEL, GeminiProvider

PROVIDER = "gemini"  # the quota ledger's provider
PREFIX = "llm:"  # before the model's finding types
MAX_ENTRIES = 80  # entries in the evidence table
MAX_STEPS = 6  # steps per entry: those in force or hidden first, then the nearest to the chapter
MAX_STEP_TEXT = 600  # characters of a step's text
MAX_TABLE = 60_000  # characters of the whole table
MAX_FINDINGS = 50  # kept from one answer
MAX_MESSAGE = 500

MARKER = "Continuity check of a chapter draft against the story's canon."
PROMPT = (
    MARKER + "\n"
    "You are the continuity editor of a serial. The draft below is chapter {chapter}. The evidence table lists the\n"
    "canon entries the draft names, each with its versions (steps) and where each stands at chapter {chapter}:\n"
    "\"in force\", \"earlier\" (superseded), \"later\" (not true until a later chapter), \"hidden\" (a secret canon\n"
    "keeps until a later chapter: the draft must not reveal it) or \"retired\".\n"
    "Report only clear contradictions between the draft and the canon at chapter {chapter}: an entry used before\n"
    "it enters canon (not_yet_in_canon), a retired entry used as present (retired), a passage revealing a hidden\n"
    "version (spoiler), a fact stated otherwise than the version in force says (field_conflict), a dead, missing\n"
    "or imprisoned character acting (unavailable_character), or another contradiction (other). Quoted speech,\n"
    "memories, negations and hypotheticals are not contradictions. When unsure, report nothing.\n"
    "For each finding give: the entry as the table gives it (kind, key, name); the span, where start and end are\n"
    "character offsets into the draft text exactly as given between the markers (0-based, end exclusive,\n"
    "Unicode code points) and text is exactly that part of the draft, the shortest passage showing the\n"
    "contradiction; the evidence, the table's steps that prove it (text, valid_from and source as the table\n"
    "gives them); the severity (error, or warning when it may be intended); a one-sentence message.\n\n"
    "Already found (do not repeat):\n{found}\n\n"
    "Evidence table (JSON, one entry per line):\n{table}\n\n"
    "Draft text of chapter {chapter}, between <<<DRAFT and DRAFT>>> (the markers are not part of it):\n"
    "<<<DRAFT\n{text}\nDRAFT>>>"
)


class EntryRef(BaseModel):
    kind: str = Field(description="The entry's kind, as in the evidence table")
    key: str = Field(description="The entry's key, as in the evidence table")
    name: str = Field(description="The entry's name")


class SpanRef(BaseModel):
    start: int = Field(description="Offset of the passage's first character in the draft text (0-based)")
    end: int = Field(description="Offset just after the passage's last character (exclusive)")
    text: str = Field(description="The passage, exactly as the draft writes it")


class EvidenceRef(BaseModel):
    text: str = Field(description="The step's text, as in the evidence table")
    valid_from: int = Field(description="The step's valid_from chapter")
    source: int = Field(description="The step's source (log position), as in the evidence table")


class FindingSchema(BaseModel):
    # The rules' types (``continuity_rules.TYPES``) and ``other``.
    type: Literal["not_yet_in_canon", "retired", "spoiler", "field_conflict", "unavailable_character", "knowledge_leak",
                  "other"]
    severity: Literal["error", "warning"]
    entry: EntryRef
    span: SpanRef
    evidence: list[EvidenceRef] = Field(description="The evidence table's steps that prove the finding")
    message: str = Field(description="One sentence: what the draft says against the canon")


class FindingsSchema(BaseModel):
    findings: list[FindingSchema] = Field(description="The contradictions found; empty when there are none")


def standing(step: Step, chapter: int) -> str:
    """Where ``step`` stands at ``chapter``: retired, hidden, in force, earlier or later."""
    if step.valid_from > chapter:
        return "later"
    if not step.holds_at(chapter):
        return "earlier"
    if step.retired:
        return "retired"
    if hidden_at(step.hidden_until, chapter):
        return "hidden"
    return "in force"


def evidence_table(steps: list[Step], chapter: int) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[Step]]]:
    """The table sent (one dict per entry, at most ``MAX_ENTRIES``, ``MAX_STEPS`` steps each, within
    ``MAX_TABLE`` characters) and the steps it shows, by entry. The story's continuity
    vocabulary entry is not sent: it is the rules' configuration, not a fact of the story."""
    by_entry: dict[tuple[str, str], list[Step]] = {}
    for s in steps:
        if (s.kind, s.key) != VOCABULARY_ENTRY:
            by_entry.setdefault((s.kind, s.key), []).append(s)
    table: list[dict[str, Any]] = []
    shown: dict[tuple[str, str], list[Step]] = {}
    size = 0
    for ref in sorted(by_entry)[:MAX_ENTRIES]:
        timeline = by_entry[ref]
        kept = sorted(timeline, key=lambda s: (standing(s, chapter) not in ("in force", "hidden", "retired"),
                                               abs(s.valid_from - chapter), s.step))[:MAX_STEPS]
        kept.sort(key=lambda s: s.step)
        last = timeline[-1]
        row = {"kind": ref[0], "key": ref[1], "name": last.name, "aliases": list(last.aliases),
               "steps": [{"source": s.source, "valid_from": s.valid_from, "valid_to": s.valid_to,
                          "standing": standing(s, chapter), "state": s.state, "hidden_until": s.hidden_until,
                          "facts": s.facts, "text": s.text[:MAX_STEP_TEXT]} for s in kept]}
        size += len(json.dumps(row, ensure_ascii=False))
        if size > MAX_TABLE and table:
            break
        table.append(row)
        shown[ref] = kept
    return table, shown


def _located(text: str, start: int, said: str) -> tuple[int, int] | None:
    """The span of ``said`` in ``text``: at ``start`` if it is there, else its occurrence nearest
    ``start``; None when ``text`` does not hold it (or it is blank)."""
    if not said.strip():
        return None
    if 0 <= start and text[start:start + len(said)] == said:
        return start, start + len(said)
    found: list[int] = []
    at = text.find(said)
    while at >= 0 and len(found) < 1000:
        found.append(at)
        at = text.find(said, at + 1)
    if not found:
        return None
    best = min(found, key=lambda i: (abs(i - start), i))
    return best, best + len(said)


def validated(answer: FindingsSchema, draft: DraftView, shown: dict[tuple[str, str], list[Step]]) -> list[Finding]:
    """The model's findings that hold up (see the module's docstring), in the rules' order."""
    text = draft.text
    steps = {s.source: s for timeline in shown.values() for s in timeline}
    out: dict[str, Finding] = {}
    for f in answer.findings:
        located = _located(text, f.span.start, f.span.text)
        if located is None:
            continue
        start, end = located
        ref = (f.entry.kind, f.entry.key)
        if ref not in shown:
            continue
        sources = sorted({e.source for e in f.evidence if e.source in steps})
        if not sources:
            continue
        type_ = PREFIX + f.type
        proof = tuple(Evidence(steps[p].text, steps[p].valid_from, steps[p].source) for p in sources)
        message = " ".join(f.message.split())[:MAX_MESSAGE] or f"{f.type} (the model gave no message)"
        fid = finding_id(draft.draft_id, type_, ref[0], ref[1], "", start, end, sources)
        out.setdefault(fid, Finding(fid, type_, f.severity, ref[0], ref[1], shown[ref][-1].name, start, end,
                                    text[start:end], proof, message))
    kept = sorted(out.values(), key=lambda f: (f.start, f.type, f.kind, f.key, f.id))
    return kept[:MAX_FINDINGS]


def _repeats(f: dict[str, Any], rules: list[dict[str, Any]]) -> bool:
    """Does the model's finding ``f`` say what one of the rules' findings says?"""
    base = f["type"][len(PREFIX):]
    return any(base == r["type"] and (f["entry"]["kind"], f["entry"]["key"]) == (r["entry"]["kind"], r["entry"]["key"])
               and f["span"]["start"] < r["span"]["end"] and r["span"]["start"] < f["span"]["end"] for r in rules)


class GeminiJudge:
    """A ``application.ports.Judge``: one metered, cached Gemini review of a draft."""

    def __init__(self, quota: Quota, cache: SqlJudgeCache, api_key: str | None = None, *, base_url: str | None = None,
                 model: str = GENERATE_MODEL, timeout_ms: int = 60_000, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.quota = quota
        self.cache = cache
        self.sleep = sleep
        self.clock = clock
        self.gemini = GeminiProvider(api_key, base_url=base_url, model=model, timeout_ms=timeout_ms)  # no key: raises
        self.name = self.gemini.name
        self.note = ""  # how the last review was answered, for its stage

    def cache_key(self, story_id: str, draft: DraftView, shown: dict[tuple[str, str], list[Step]]) -> str:
        steps = sorted((s.kind, s.key, s.step, s.source) for timeline in shown.values() for s in timeline)
        text_hash = hashlib.sha256(draft.text.encode("utf-8", "surrogatepass")).hexdigest()
        raw = json.dumps([self.name, story_id, draft.draft_id, draft.chapter, text_hash, steps], ensure_ascii=False)
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()

    def judge(self, report: dict[str, Any], draft: DraftView, evidence: list[Step]) -> list[dict[str, Any]]:
        story_id, rules = report["story_id"], report["findings"]
        table, shown = evidence_table(evidence, draft.chapter)
        if not table:
            self.note = "the draft names no canon entry: nothing to review, no call"
            return []
        key = self.cache_key(story_id, draft, shown)
        cached = self.cache.get(key)
        if cached is not None:
            found = json.loads(cached)
            self.note = "from cache, no call"
        else:
            found_text = "\n".join(f"- {r['type']} {r['entry']['kind']} {r['entry']['key']} at "
                                   f"{r['span']['start']}-{r['span']['end']}" for r in rules)
            prompt = PROMPT.format(chapter=draft.chapter, text=draft.text, found=found_text or "(none)",
                                   table="\n".join(json.dumps(row, ensure_ascii=False) for row in table))
            answer = metered_call(self.quota, PROVIDER, GENERATE, f"continuity:{story_id}/{draft.draft_id}",
                                  lambda: self._ask(prompt), self.sleep)
            found = [f.as_dict() for f in validated(answer, draft, shown)]
            position = max(s.source for timeline in shown.values() for s in timeline)
            self.note = f"one call, {len(answer.findings)} finding(s) answered, {len(found)} valid, cached"
            try:
                self.cache.put(key, story_id, draft.draft_id, position, self.name,
                               json.dumps(found, ensure_ascii=False), self.clock())
            except Exception as e:  # noqa: BLE001 - the answer is good; only the next ask pays again
                self.note = f"one call, {len(found)} valid finding(s), not cached ({type(e).__name__})"
        return [f for f in found if not _repeats(f, rules)]

    def _ask(self, prompt: str) -> FindingsSchema:
        answer = self.gemini.generate(prompt, FindingsSchema)
        if answer is None:  # inside the metered call: the reservation settles as an error
            raise ProviderError("gemini returned no valid findings JSON (not JSON, or not the findings schema)")
        return answer

