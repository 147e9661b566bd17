"""The settings of a retrieval stage, declared once.

``agentbench retrieve``, ``agentbench run`` (whose :class:`~agentbench.pipeline.RunConfig` extends this
model), :func:`agentbench.retrieve` and :func:`agentbench.retrieve_all` all take these fields; the CLI
builds its options from the field descriptions, so a default, a bound or a help text cannot drift between
them. Settings are immutable once validated; ``--rerank`` and ``--visible-tests`` are parsed here, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ..errors import ConfigError
from ..execution.base import SANDBOX_KINDS, check_sandbox_kind
from ..pools.split import DEFAULT_VISIBLE, VisibleTests
from ._defaults import DEFAULT_KS, DEFAULT_RERANK_K

if TYPE_CHECKING:
    from .rerank import Reranker, Reranking

__all__ = ["RetrievalSettings", "flag", "config_error", "settings_from"]

MAX_TIMEOUT_S = 3600.0
"""--timeout's upper bound: an hour of CPU for one execution (a larger value, or inf, is a typo)."""
MAX_SANDBOX_WORKERS = 1024
MAX_RERANK_K = 100
"""--rerank-k's upper bound: every candidate is executed per query, and the paper's pools hold five
snippets per query (a larger value only adds executions of unrelated snippets)."""
MAX_SEED = 2**32 - 1
"""Seeds go to numpy's generators (non-negative only) and to the local model (32 bits)."""


def flag(field: str) -> str:
    """The command-line flag of a settings field."""
    return "--" + field.replace("_", "-")


def config_error(exc: ValidationError) -> ConfigError:
    """A pydantic error as agentbench's one-line ConfigError naming the flag."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "settings"
    name = flag(where) if first["loc"] else where
    if first["type"] == "extra_forbidden":
        return ConfigError(f"unknown option {where!r}: see agentbench.RunConfig for the settings")
    return ConfigError(f"{name}: {first['msg']} (got {first.get('input')!r})")


class RetrievalSettings(BaseModel):
    """How retrieval is run and scored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ks: tuple[int, ...] = Field(DEFAULT_KS, description="Cutoffs k of exec@k, precision@k and nDCG@k.")
    limit: int | None = Field(None, description="Only the first N queries of the pool.")
    sample: int | None = Field(
        None,
        description="Only a random sample of N queries, drawn with --seed (in pool order; after --limit).",
    )
    sandbox: str = Field(
        "auto", description=f"Executor: {', '.join(SANDBOX_KINDS[:-1])} or {SANDBOX_KINDS[-1]}."
    )
    sandbox_workers: int | None = Field(
        None, description="Parallel sandbox workers (default: cores; with --ray, per node)."
    )
    ray: str | None = Field(
        None,
        description="Run the sandbox jobs on the Ray cluster at this address (HOST:PORT of its head, or "
        "auto on a node of it); every node runs its own --sandbox executor.",
    )
    timeout: float = Field(10.0, description="Seconds of CPU time per execution.")
    seed: int = Field(
        0, description="Seed of the bootstrap intervals, the --rerank test split and (in runs) sampling."
    )
    store_dir: str = Field("stores", description="Where Chroma collections are persisted.")
    chroma_url: str | None = Field(
        None, description="Use a Chroma server (http://host:port) instead of the embedded store."
    )
    rerank: str | None = Field(
        None,
        description="Rerank the top k: exec-visible, exec-consensus or ce:<model>. Every metric is then "
        "computed on held-out asserts, before and after.",
    )
    visible_tests: str = Field(
        DEFAULT_VISIBLE,
        description="With --rerank or the agent conditions: visible asserts per query, a count N or a "
        "fraction; the rest are held out and score every condition.",
    )
    rerank_k: int = Field(DEFAULT_RERANK_K, description="With --rerank: candidates reranked.")

    _reranker: Reranker | None = PrivateAttr(None)
    _visible: VisibleTests | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("store_dir", "visible_tests"):  # Path objects and numbers are accepted
                if key in data and data[key] is not None and not isinstance(data[key], str):
                    data[key] = str(data[key])
            if isinstance(data.get("ks"), list):
                data["ks"] = tuple(data["ks"])
        return data

    @model_validator(mode="after")
    def _check(self) -> RetrievalSettings:
        # ConfigError is not a ValueError, so pydantic lets these one-line messages through unchanged
        if not self.ks or any(k < 1 for k in self.ks):
            raise ConfigError(f"cutoffs must be positive integers, got {list(self.ks)}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {self.limit}")
        if self.sample is not None and self.sample < 1:
            raise ConfigError(f"--sample must be at least 1, got {self.sample}")
        check_sandbox_kind(self.sandbox)
        if self.sandbox_workers is not None and self.sandbox_workers < 1:
            raise ConfigError(f"--sandbox-workers must be at least 1, not {self.sandbox_workers}")
        if self.sandbox_workers is not None and self.sandbox_workers > MAX_SANDBOX_WORKERS:
            raise ConfigError(
                f"--sandbox-workers must be between 1 and {MAX_SANDBOX_WORKERS} (per machine), "
                f"not {self.sandbox_workers}"
            )
        if not self.timeout >= 0.1:
            raise ConfigError(f"--timeout must be at least 0.1 seconds, got {self.timeout}")
        if not self.timeout <= MAX_TIMEOUT_S:
            raise ConfigError(
                f"--timeout must be between 0.1 and {MAX_TIMEOUT_S:g} seconds of CPU per execution, "
                f"got {self.timeout}"
            )
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"--seed must be between 0 and {MAX_SEED}, got {self.seed}")
        if self.ray is not None:
            from ..execution.cluster import check_address

            check_address(self.ray)
        if self.rerank_k < 1:
            raise ConfigError(f"--rerank-k must be at least 1, got {self.rerank_k}")
        if self.rerank_k > MAX_RERANK_K:
            raise ConfigError(
                f"--rerank-k must be between 1 and {MAX_RERANK_K} (candidates executed per query), "
                f"got {self.rerank_k}"
            )
        if self.chroma_url is not None:
            from .store import parse_chroma_url

            parse_chroma_url(self.chroma_url)
        from .rerank.registry import parse_reranker

        # parsed here once; no model is loaded until the reranker runs
        self._visible = VisibleTests.parse(self.visible_tests)
        if self.rerank:
            self._reranker = parse_reranker(self.rerank)
        return self

    def select(self, queries: list[Any]) -> list[Any]:
        """The queries a run or retrieval covers: the first ``limit``, then a seeded ``sample`` of them.

        A ``sample`` larger than the queries there are to sample from is a ConfigError naming both
        numbers (it would silently be the whole pool); a ``limit`` larger than the pool takes it all."""
        chosen = queries[: self.limit] if self.limit else list(queries)
        if self.sample is not None and self.sample > len(chosen):
            n = f"{len(chosen)} {'query' if len(chosen) == 1 else 'queries'}"
            among = (
                f"the {n} left by --limit {self.limit}"
                if self.limit and self.limit < len(queries)
                else f"the pool's {n}"
            )
            raise ConfigError(
                f"--sample {self.sample} is more than {among}: pass --sample {len(chosen)} or less"
            )
        if self.sample is not None and self.sample < len(chosen):
            import random

            picked = set(random.Random(f"{self.seed}:sample").sample(range(len(chosen)), self.sample))
            chosen = [q for i, q in enumerate(chosen) if i in picked]
        return chosen

    @property
    def cutoffs(self) -> list[int]:
        return sorted(set(self.ks))

    @property
    def reranker(self) -> Reranker | None:
        """The parsed ``--rerank`` value (None without it)."""
        return self._reranker

    @property
    def visible(self) -> VisibleTests | None:
        """The parsed ``--visible-tests`` value."""
        return self._visible

    def reranking(self) -> Reranking | None:
        """The rerank stage of a run or a ``retrieve``: None without ``--rerank``; a reranker that cannot
        run here is skipped with one logged line (see :meth:`.rerank.Reranking.prepare`)."""
        if self._reranker is None or self._visible is None:
            return None
        from .rerank.stage import Reranking

        return Reranking.prepare(self._reranker, self._visible, self.rerank_k, self.seed)

    def retrieval_settings(self) -> RetrievalSettings:
        """Only the retrieval fields (a :class:`RunConfig` passes itself on as these)."""
        if type(self) is RetrievalSettings:
            return self
        fields = {name: getattr(self, name) for name in RetrievalSettings.model_fields}
        out = RetrievalSettings.model_construct(**fields)  # already validated: --rerank is not reparsed
        out._reranker, out._visible = self._reranker, self._visible
        return out


def settings_from(model: type[BaseModel], fields: dict[str, Any]) -> Any:
    """``model(**fields)`` with pydantic's errors turned into one-line ConfigErrors."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise config_error(exc) from None
