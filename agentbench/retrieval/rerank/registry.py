"""The rerankers ``--rerank`` can name, in a registry.

The stage never names a reranker: :func:`parse_reranker` asks each registered class whether it
:meth:`~.base.Reranker.accepts` the value, so a new reranker plugs in with :func:`register` and no edit
to the stage, the settings or the results::

    class Shortest(Reranker):
        name = form = "shortest"

        def rerank(self, inputs, sandbox):
            return [RerankOutcome(stable_order([len(c.code) for c in inp.candidates])) for inp in inputs]

    register(Shortest)
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...errors import ConfigError
from .base import Reranker, RerankStats
from .ce import CrossEncoderReranker
from .consensus import ConsensusReranker
from .visible import VisibleTestsReranker

__all__ = ["register", "registered", "reranker_forms", "parse_reranker", "stats_model_for"]

_REGISTRY: dict[str, type[Reranker]] = {}


def register(reranker: type[Reranker], *, replace: bool = False) -> type[Reranker]:
    """Add a reranker class; the values it accepts become valid for ``--rerank``."""
    if reranker.form in _REGISTRY and not replace:
        raise ConfigError(f"reranker {reranker.form!r} is already registered")
    _REGISTRY[reranker.form] = reranker
    return reranker


def registered() -> dict[str, type[Reranker]]:
    """form -> reranker class, in registration order."""
    return dict(_REGISTRY)


def reranker_forms() -> str:
    """The ``--rerank`` values, as listed in messages."""
    return ", ".join(_REGISTRY)


def _find(spec: str) -> type[Reranker] | None:
    return next((cls for cls in _REGISTRY.values() if cls.accepts(spec)), None)


def parse_reranker(spec: str) -> Reranker:
    """A ``--rerank`` value as a reranker (no model loaded yet); ConfigError naming every form if unknown."""
    cls = _find(spec.strip())
    if cls is None:
        raise ConfigError(f"unknown reranker {spec!r}: use one of {reranker_forms()}")
    return cls.from_spec(spec.strip())


def stats_model_for(name: str | None) -> type[RerankStats]:
    """The statistics model of the reranker a results file names (``rerank.name``); the plain
    :class:`~.base.RerankStats` for a skipped reranking or a reranker not registered here."""
    cls = _find(name) if name is not None else None
    return cls.stats_model if cls is not None else RerankStats


def with_typed_stats(data: Any) -> Any:
    """A "before" validator's input with ``stats`` read as the model of the reranker ``name`` names (not
    guessed from its keys); statistics of another tool or version are kept as they are."""
    if isinstance(data, dict) and isinstance(data.get("stats"), dict):
        try:
            stats = stats_model_for(data.get("name")).model_validate(data["stats"])
        except ValidationError:
            return data
        data = {**data, "stats": stats}
    return data


register(VisibleTestsReranker)
register(ConsensusReranker)
register(CrossEncoderReranker)
