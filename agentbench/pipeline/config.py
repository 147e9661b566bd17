"""The resolved configuration of a run; written to the run directory and checked on --resume.

:class:`RunConfig` extends the retrieval stage's :class:`~agentbench.retrieval.settings.RetrievalSettings`
(declared once, shared with ``agentbench retrieve``) with the generation settings. It is immutable: what is
validated is what runs and what is written to ``config.json``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field, PrivateAttr, ValidationInfo, model_serializer, model_validator

from ..agent.tools import Budget
from ..errors import ConfigError
from ..llm import DEFAULT_MODEL
from ..pools.models import TEST_SETS
from ..retrieval import DEFAULT_EMBEDDER
from ..retrieval.embedder_spec import EmbedderSpec
from ..retrieval.settings import RetrievalSettings
from .conditions import DEFAULT_CONDITIONS, RAG_RERANKED, available, default_conditions, uses_tools

__all__ = ["RunConfig", "RUN_SCHEMA_VERSION", "RAG_RERANKED"]

RUN_SCHEMA_VERSION = 1
MAX_CONCURRENCY = 1024
"""--concurrency's upper bound: each request in flight holds a socket, and a process may open about
1024 files by default."""
MAX_TEMPERATURE = 2.0

# Settings that cannot change any record; everything else must match for --resume.
_NOT_OUTPUT_AFFECTING = {
    "schema_version",
    "concurrency",
    "llm_processes",
    "run_dir",
    "resume",
    "sandbox_workers",
    "ray",
    "store_dir",
    "chroma_url",
    "ks",
    "max_error_rate",
    "retry_errors",
}


def _with_tools(conditions: Any) -> bool:
    """Whether stored ``conditions`` hold a tool-using one (unknown names are left to validation)."""
    names = [conditions] if isinstance(conditions, str) else list(conditions or ())
    return uses_tools([n for n in names if isinstance(n, str)])


class RunConfig(RetrievalSettings):
    schema_version: int = RUN_SCHEMA_VERSION
    pool: str = Field("core", description="`core`, `execretrieval` or a pool directory.")
    llm: str = Field(DEFAULT_MODEL, description="Any LiteLLM model string, or local/qwen2.5-coder-1.5b|0.5b.")
    embedder: str = Field(DEFAULT_EMBEDDER, description="minilm, bm25, st:<model>, litellm:<model>.")
    retriever: str | None = None
    """A retriever plug-in (``module:attr``, or the name of an object given to the Python API); replaces
    the embedder."""
    agent: str | None = None
    """An agent plug-in (as ``retriever``); replaces the LiteLLM agent, so ``llm`` and ``prompt`` are unused."""
    conditions: tuple[str, ...] = DEFAULT_CONDITIONS
    k: int = 1
    concurrency: int = 4
    llm_processes: int | None = None
    """Worker processes making API calls (:mod:`agentbench.llm.processes`); 0: every call in this process;
    None (the default): one per 32 of ``concurrency``, at most one per core and 4 in all, and at least one
    with kept workers (:func:`~agentbench.llm.processes.default_processes`). Local and in-process
    providers always run in this process."""
    prompt: str | None = None
    api_base: str | None = None
    temperature: float = 0.0
    samples: int = Field(
        1,
        description="Generations per (query, condition), for pass@k; more than 1 needs a temperature above 0 "
        "to differ.",
    )
    max_tokens: int = 1024
    run_dir: str | None = None
    resume: bool = False
    retry_errors: bool = Field(
        True,
        description="With --resume, run again the records that failed with llm_error or infra_error (an "
        "outage of the model's service or of the sandbox).",
    )
    max_error_rate: float = Field(
        0.1,
        description="The run fails (exit 2) when more than this share of its records are llm_error or "
        "infra_error: an outage, not a result.",
    )
    tests: str = Field(
        "augmented",
        description="What a generation is scored on: augmented (the pool's asserts plus those `pool "
        "augment` added, where it has them) or original (its asserts alone).",
    )
    max_turns: int = Field(6, description="Agent conditions: model replies per task.")
    max_tool_calls: int = Field(12, description="Agent conditions: tool calls per task.")
    max_agent_tokens: int = Field(
        12000, description="Agent conditions: prompt plus completion tokens per task."
    )
    max_agent_seconds: float | None = Field(
        None,
        description="Agent conditions: wall seconds per task (off by default: under load it would make "
        "results depend on the machine's speed).",
    )
    test_first: bool = Field(
        True,
        description="Agent conditions: the agent must run the visible tests (run_tests) before it may "
        "answer or submit (--no-test-first: it may answer at once).",
    )

    _embedder_spec: EmbedderSpec | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any, info: ValidationInfo) -> Any:
        """Conditions de-duplicated in order; with --rerank, rag_reranked follows rag."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if info.context and info.context.get("stored") and "test_first" not in data:
            if _with_tools(data.get("conditions")):
                data["test_first"] = False  # a run directory from before the rule: its agents answered freely
        for key in ("prompt", "run_dir"):  # Path objects are accepted
            if data.get(key) is not None and not isinstance(data[key], str):
                data[key] = str(data[key])
        conditions = data.get("conditions")
        if isinstance(conditions, str):
            conditions = [conditions]
        if conditions is not None:
            conditions = list(dict.fromkeys(conditions))
            if data.get("rerank") and "rag" in conditions and RAG_RERANKED not in conditions:
                conditions.insert(conditions.index("rag") + 1, RAG_RERANKED)
            data["conditions"] = tuple(conditions)
        elif data.get("rerank"):
            data["conditions"] = tuple(default_conditions(rerank=True))
        return data

    @model_validator(mode="after")
    def _check_run(self) -> RunConfig:
        known = available(rerank=bool(self.rerank))
        unknown = [c for c in self.conditions if c not in known]
        if unknown or not self.conditions:
            raise ConfigError(
                f"unknown condition {unknown[0] if unknown else '(none)'!r}: use {', '.join(known)}"
            )
        # the ranking kept per query, which rag's context is cut from
        from ..retrieval.evaluate import TOP_RESULTS

        if not 1 <= self.k <= TOP_RESULTS:
            raise ConfigError(
                f"--k must be between 1 and {TOP_RESULTS} (the snippets ranked per query), got {self.k}"
            )
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.concurrency > MAX_CONCURRENCY:
            raise ConfigError(
                f"--concurrency must be between 1 and {MAX_CONCURRENCY} requests in flight, got {self.concurrency}"
            )
        if self.llm_processes is not None and self.llm_processes < 0:
            raise ConfigError(f"--llm-processes must be 0 or more, got {self.llm_processes}")
        if self.llm_processes is not None and self.llm_processes > self.concurrency:
            raise ConfigError(
                f"--llm-processes must be between 0 and --concurrency ({self.concurrency}): a process "
                f"makes at least one request at a time, got {self.llm_processes}"
            )
        if self.max_tokens < 1:
            raise ConfigError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        if self.samples < 1:
            raise ConfigError(
                f"--samples must be at least 1 (generations per query and condition), got {self.samples}"
            )
        if not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise ConfigError(
                f"temperature must be between 0 and {MAX_TEMPERATURE:g}, got {self.temperature}"
            )
        for name in ("max_turns", "max_tool_calls", "max_agent_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise ConfigError(f"--max-error-rate must be between 0 and 1, got {self.max_error_rate:g}")
        if self.max_agent_seconds is not None and not self.max_agent_seconds > 0:
            raise ConfigError(f"--max-agent-seconds must be positive, got {self.max_agent_seconds}")
        if self.tests not in TEST_SETS:
            raise ConfigError(f"--tests must be {' or '.join(TEST_SETS)}, got {self.tests!r}")
        if self.agent and self.prompt:
            raise ConfigError(
                "--prompt applies to the built-in agent; an --agent plug-in writes its own prompts"
            )
        self._embedder_spec = EmbedderSpec.parse(self.embedder)  # parsed here once, nothing loaded
        return self

    @model_serializer(mode="wrap")
    def _one_sample_as_before(self, handler: Any) -> Any:
        """``samples`` is left out at 1, so a one-sample run's config.json (and fingerprint) are what they
        were before repeated samples existed, and older run directories resume."""
        data = handler(self)
        if isinstance(data, dict) and data.get("samples") == 1:
            del data["samples"]
        if isinstance(data, dict) and not uses_tools(self.conditions):
            data.pop("test_first", None)  # no agent here: the rule changes nothing, old directories resume
        return data

    def validate_values(self) -> RunConfig:
        """Kept for callers of 0.1: a RunConfig is validated when it is made."""
        return self

    def budget(self) -> Budget:
        """The per-task limits of the tool-using conditions."""
        return Budget(
            self.max_turns,
            self.max_tool_calls,
            self.max_agent_tokens,
            self.max_agent_seconds,
            self.test_first,
        )

    @property
    def embedder_spec(self) -> EmbedderSpec:
        """The parsed ``--embedder`` value."""
        return self._embedder_spec or EmbedderSpec.parse(self.embedder)

    @property
    def agent_name(self) -> str:
        return self.agent or self.llm

    @property
    def retriever_name(self) -> str:
        return self.retriever or self.embedder

    def output_settings(self) -> dict[str, Any]:
        """Every setting that can change a record, as JSON values."""
        return self.model_dump(mode="json", exclude=_NOT_OUTPUT_AFFECTING)

    def fingerprint(self) -> str:
        """Hash of every setting that can change a record."""
        return hashlib.sha256(json.dumps(self.output_settings(), sort_keys=True).encode()).hexdigest()[:16]
