"""``ce:<model>``: a sentence-transformers cross-encoder scores each (query, candidate code) pair.

The model is a local directory or a Hugging Face name already in the local cache (agentbench runs with
``HF_HUB_OFFLINE=1`` unless told otherwise). When it is neither, :meth:`CrossEncoderReranker.check` raises
:class:`~.base.RerankerUnavailable` and the commands skip reranking with one line. Nothing is executed:
the cost is model time only. Ties keep vector order. It reports no statistics (``rerank.stats`` is ``{}``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..._env import prepare_environment
from ...errors import ModelError
from .base import Reranker, RerankerUnavailable, RerankInput, RerankOutcome, Sandbox, stable_order

__all__ = ["CrossEncoderReranker"]

Scorer = Callable[[list[tuple[str, str]]], Sequence[float]]


class CrossEncoderReranker(Reranker):
    """Orders candidates by cross-encoder score, highest first."""

    form = "ce:<model-name-or-path>"

    @classmethod
    def accepts(cls, spec: str) -> bool:
        return spec.startswith("ce:") and bool(spec[3:])

    @classmethod
    def from_spec(cls, spec: str) -> CrossEncoderReranker:
        return cls(spec)

    def __init__(self, spec: str, scorer: Scorer | None = None) -> None:
        self.name = spec
        self.model_ref = spec.removeprefix("ce:")
        self._scorer = scorer  # tests pass a function instead of a model

    def check(self) -> None:
        if self._scorer is not None or Path(self.model_ref).expanduser().exists():
            return
        prepare_environment()
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            from huggingface_hub import try_to_load_from_cache

            if not isinstance(try_to_load_from_cache(self.model_ref, "config.json"), str):
                raise RerankerUnavailable(
                    f"cross-encoder {self.model_ref!r} is not available offline (neither a local directory "
                    "nor in the Hugging Face cache); skipping reranking"
                )

    def _load(self) -> Scorer:
        if self._scorer is None:
            prepare_environment()
            try:
                from sentence_transformers import CrossEncoder

                model = CrossEncoder(self.model_ref, device="cpu")
            except (OSError, ValueError, RuntimeError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ModelError(f"cannot load cross-encoder {self.model_ref!r}: {first}") from exc

            def score(pairs: list[tuple[str, str]]) -> Sequence[float]:
                return [float(s) for s in model.predict(pairs, show_progress_bar=False)]

            self._scorer = score
        return self._scorer

    def rerank(self, inputs: Sequence[RerankInput], sandbox: Sandbox) -> list[RerankOutcome]:
        score = self._load()
        outcomes = []
        for inp in inputs:
            scores = list(score([(inp.query, c.code) for c in inp.candidates])) if inp.candidates else []
            outcomes.append(RerankOutcome(stable_order([-s for s in scores]), {"ce_scores": scores}))
        return outcomes
