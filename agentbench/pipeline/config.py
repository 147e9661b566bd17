"""The resolved configuration of a run; written to the run directory and checked on --resume."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, Field

from ..agent import CONDITIONS, DEFAULT_MODEL
from ..errors import ConfigError
from ..retrieval import DEFAULT_EMBEDDER

__all__ = ["RunConfig", "RUN_SCHEMA_VERSION", "RAG_RERANKED"]

RUN_SCHEMA_VERSION = 1
RAG_RERANKED = "rag_reranked"  # --rerank: the rag prompt with the reranked top-k as context

# Settings that cannot change any record; everything else must match for --resume.
_NOT_OUTPUT_AFFECTING = {"concurrency", "run_dir", "resume", "sandbox_workers", "store_dir", "chroma_url"}


class RunConfig(BaseModel):
    schema_version: int = RUN_SCHEMA_VERSION
    pool: str = "core"
    llm: str = DEFAULT_MODEL
    embedder: str = DEFAULT_EMBEDDER
    retriever: str | None = None
    """A retriever plug-in (``module:attr``, or the name of an object given to the Python API); replaces
    the embedder."""
    agent: str | None = None
    """An agent plug-in (as ``retriever``); replaces the LiteLLM agent, so ``llm`` and ``prompt`` are unused."""
    conditions: list[str] = Field(default_factory=lambda: list(CONDITIONS))
    k: int = 1
    limit: int | None = None
    concurrency: int = 4
    seed: int = 0
    prompt: str | None = None
    api_base: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    sandbox: str = "auto"
    sandbox_workers: int | None = None
    timeout: float = 10.0
    store_dir: str = "stores"
    chroma_url: str | None = None
    run_dir: str | None = None
    resume: bool = False
    rerank: str | None = None
    """--rerank NAME: score every condition on held-out asserts and add the rag_reranked condition."""
    visible_tests: str = "0.5"
    rerank_k: int = 10

    def validate_values(self) -> RunConfig:
        known = (*CONDITIONS, RAG_RERANKED) if self.rerank else CONDITIONS
        unknown = [c for c in self.conditions if c not in known]
        if unknown or not self.conditions:
            raise ConfigError(
                f"unknown condition {unknown[0] if unknown else '(none)'!r}: use {', '.join(known)}"
            )
        if self.rerank:  # issue 7: names and values checked before any work
            from ..retrieval.rerank import Reranking, VisibleTests, parse_reranker

            parse_reranker(self.rerank)
            Reranking(None, VisibleTests.parse(self.visible_tests), self.rerank_k)
            if "rag" in self.conditions and RAG_RERANKED not in self.conditions:
                self.conditions.insert(self.conditions.index("rag") + 1, RAG_RERANKED)
        if self.k < 1:
            raise ConfigError(f"--k must be at least 1, got {self.k}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {self.limit}")
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {self.concurrency}")
        self.conditions = list(dict.fromkeys(self.conditions))
        if self.agent and self.prompt:
            raise ConfigError(
                "--prompt applies to the built-in agent; an --agent plug-in writes its own prompts"
            )
        return self

    @property
    def agent_name(self) -> str:
        return self.agent or self.llm

    @property
    def retriever_name(self) -> str:
        return self.retriever or self.embedder

    def fingerprint(self) -> str:
        """Hash of every setting that can change a record."""
        data = self.model_dump(exclude=_NOT_OUTPUT_AFFECTING)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
