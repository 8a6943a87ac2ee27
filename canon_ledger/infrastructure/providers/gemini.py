"""Gemini through the real google-genai SDK: structured page generation, step-back queries, chapter and
volume summaries, embeddings.

The SDK does not retry by default, and its retry options ignore the server's retry delay;
we retry nothing here. A 5xx is raised as retryable and the compiler retries it (each
attempt its own reserved call in the quota ledger); a 429 is raised as exhaustion. A reply
whose JSON does not validate (``parsed is None``) is an error: no page is written.
The API key is sent by the SDK in a header; it is scrubbed from every message we raise.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from canon_ledger.application.knowledge.compile import chunk_bodies
from canon_ledger.application.knowledge.ports import (
    ChunkView,
    Embedder,
    PageDraft,
    PageWriter,
    ProviderError,
    ProviderExhausted,
    ProviderThrottled,
    TopicView,
)
from canon_ledger.application.retrieval.ports import QueryGeneraliser

GENERATE_MODEL = "gemini-2.5-flash"
EMBED_MODEL = "gemini-embedding-001"
KEY_ENV = "GEMINI_API_KEY"
BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"


class PageSchema(BaseModel):
    title: str = Field(description="A short page title")
    tldr: str = Field(description="One or two sentences: what a reader must know")
    body: str = Field(description="A compact summary of the sources, in prose")
    tags: list[str] = Field(default_factory=list, description="Up to 6 lowercase keywords")
    wikilinks: list[str] = Field(default_factory=list, description="Ids of related topics, from the list given")


class StepBackSchema(BaseModel):
    query: str = Field(description="The more general question, in one line")


class SummarySchema(BaseModel):
    summary: str = Field(description="The summary, in prose, in the language of the text")


# ``canon summarize`` (application/summaries.py): one call per chapter, one per volume.
SUMMARY_WORDS = 150
CHAPTER_PROMPT = (
    "Summarise chapter {number} of \"{title}\" for a writer who will continue the story: in at most {words} words,\n"
    "what happens, who takes part, where, and how things stand at its end. Use only what the text says; keep\n"
    "names as written; write in the language of the text.\n\nChapter text:\n{text}"
)
VOLUME_PROMPT = (
    "Summarise volume {number} of \"{title}\" from its chapters' summaries, for a writer who will continue the\n"
    "story: in at most {words} words, its main events, who takes part, and how things stand at its end. Use only\n"
    "what the summaries say; keep names as written; write in their language.\n\nChapter summaries:\n{summaries}"
)


STEP_BACK_PROMPT = (
    "Step back from this question: rewrite it as the more general question whose answer gives the\n"
    "background needed to answer it (its subject's overview, main themes or basic concepts).\n"
    "Keep its subject; add no facts and no names that are not in it. One short line.\n\n"
    "Question: {query}"
)


Schema = TypeVar("Schema", bound=BaseModel)


class RetryableProviderError(ProviderError):
    retryable = True


def _daily_quota(error: Exception) -> bool:
    details = getattr(error, "details", None) or {}
    for detail in (details.get("error", {}) or {}).get("details", []) if isinstance(details, dict) else []:
        for violation in detail.get("violations", []) or []:
            if "PerDay" in str(violation.get("quotaId", "")):
                return True
    return False


def _client(api_key: str, base_url: str | None, timeout_ms: int):  # type: ignore[no-untyped-def]
    try:
        from google import genai
        from google.genai import types
    except ImportError:
        raise ProviderError("the gemini provider needs the google-genai package", sent=False) from None

    options: dict[str, Any] = {"api_version": "v1beta", "timeout": timeout_ms}
    if base_url:
        options["base_url"] = base_url
    return genai.Client(api_key=api_key, http_options=types.HttpOptions(**options))


class GeminiProvider(PageWriter, Embedder, QueryGeneraliser):
    uses_quota = True

    def __init__(self, api_key: str | None = None, *, base_url: str | None = None, model: str = GENERATE_MODEL,
                 embed_model: str = EMBED_MODEL, timeout_ms: int = 60_000) -> None:
        key = api_key or os.environ.get(KEY_ENV)
        if not key:
            raise ProviderError(f"the gemini provider needs {KEY_ENV}", sent=False)
        self._key = key
        self.model = model
        self.embed_model = embed_model
        self.name = f"gemini:{model}"
        # Keep the client: its __del__ closes the connection pool.
        self._client = _client(key, base_url or os.environ.get(BASE_URL_ENV), timeout_ms)

    # -- errors --------------------------------------------------------------------------------
    def _scrub(self, message: str) -> str:
        return message.replace(self._key, "***")

    def _translate(self, error: Exception) -> ProviderError:
        from google.genai import errors

        if isinstance(error, errors.APIError):
            status = getattr(error, "status", "") or ""
            message = self._scrub(f"gemini answered {error.code} {status}".strip())
            if error.code == 429:
                # Only a per-day quota means "stop until reset"; a per-minute one clears in seconds.
                if _daily_quota(error):
                    return ProviderExhausted(message + ": daily quota exhausted")
                return ProviderThrottled(message + ": rate limited (not the daily quota)")
            if isinstance(error, errors.ServerError):
                return RetryableProviderError(message)
            return ProviderError(message)
        kind = type(error).__name__
        if "Connect" in kind or "PoolTimeout" in kind:  # never reached the server: not spent
            return ProviderError(f"could not reach gemini ({kind})", sent=False)
        if "Timeout" in kind:
            return ProviderError(f"gemini did not answer in time ({kind})")
        return ProviderError(self._scrub(f"gemini call failed: {kind}: {error}"))

    # -- generation ----------------------------------------------------------------------------
    def _generate(self, prompt: str, schema: type[Schema]) -> Schema | None:
        from google.genai import types

        try:
            response = self._client.models.generate_content(
                model=self.model,
                contents=prompt,
                config=types.GenerateContentConfig(
                    response_mime_type="application/json",
                    response_schema=schema,
                    # One reserved call must be one billed request: no SDK-driven follow-ups.
                    automatic_continuation=False,
                    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
                ),
            )
        except Exception as e:  # noqa: BLE001 - every SDK failure becomes one of ours, key scrubbed
            raise self._translate(e) from None
        parsed = response.parsed
        if parsed is None:
            return None
        return parsed if isinstance(parsed, schema) else schema.model_validate(parsed)

    def generate(self, prompt: str, schema: type[Schema]) -> Schema | None:
        """One generate call answered in ``schema`` (structured output); None when the answer does
        not validate. Errors as ``_translate`` makes them (429: exhausted or throttled; 5xx: retryable)."""
        return self._generate(prompt, schema)

    def step_back(self, query: str) -> str:
        """One generate call: the question made more general, for the embedder (not the reranker)."""
        answer = self._generate(STEP_BACK_PROMPT.format(query=query), StepBackSchema)
        if answer is None:
            raise ProviderError("gemini returned no valid step-back JSON (parsed is None)")
        return answer.query

    def write(self, topic: TopicView, chunks: list[ChunkView], neighbours: list[TopicView]) -> PageDraft:
        sources = "\n\n".join(f"[{c.chunk_id}]\n{body}" for c, body in zip(chunks, chunk_bodies(chunks)))
        related = "\n".join(f"- {n.topic_id}: {n.title}" for n in neighbours) or "(none)"
        prompt = (
            f"Write a wiki page about the topic \"{topic.title}\" from these sources only.\n"
            f"Do not add facts that are not in the sources.\n\nRelated topic ids you may link to:\n{related}\n\n"
            f"Sources:\n{sources}"
        )
        page = self._generate(prompt, PageSchema)
        if page is None:
            raise ProviderError("gemini returned no valid page JSON (parsed is None); no page written")
        return PageDraft(page.title, page.tldr, page.body, [t.casefold() for t in page.tags][:6], list(page.wikilinks))

    def summarise_chapter(self, title: str, number: int, text: str) -> str:
        """One generate call: chapter ``number``'s summary from its accepted text."""
        return self._summary(CHAPTER_PROMPT.format(number=number, title=title, words=SUMMARY_WORDS, text=text))

    def summarise_volume(self, title: str, number: int, summaries: list[tuple[int, str]]) -> str:
        """One generate call: volume ``number``'s summary from its chapters' summaries."""
        shown = "\n\n".join(f"Chapter {chapter}: {summary}" for chapter, summary in summaries)
        return self._summary(VOLUME_PROMPT.format(number=number, title=title, words=2 * SUMMARY_WORDS,
                                                  summaries=shown))

    def _summary(self, prompt: str) -> str:
        answer = self._generate(prompt, SummarySchema)
        if answer is None or not answer.summary.strip():
            raise ProviderError("gemini returned no valid summary JSON (parsed is None or empty); nothing written")
        return answer.summary.strip()

    # -- embeddings ----------------------------------------------------------------------------
    def embed(self, texts: list[str]) -> list[list[float]]:
        try:
            result = self._client.models.embed_content(model=self.embed_model, contents=texts)
        except Exception as e:  # noqa: BLE001
            raise self._translate(e) from None
        vectors = [list(e.values or []) for e in (result.embeddings or [])]
        if len(vectors) != len(texts) or not all(vectors):
            raise ProviderError(f"gemini returned {len(vectors)} embeddings for {len(texts)} texts")
        return vectors


class GeminiEmbedder(Embedder):
    """The embedding half of the provider, as its own port (it shares the key and the client)."""

    uses_quota = True

    def __init__(self, provider: GeminiProvider) -> None:
        self._provider = provider
        self.name = f"gemini:{provider.embed_model}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._provider.embed(texts)
