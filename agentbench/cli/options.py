"""Command-line options shared by ``agentbench retrieve`` and ``agentbench run``, built from the settings
models so that a default or a help text is declared once (in :mod:`agentbench.retrieval.settings` and
:mod:`agentbench.pipeline.config`); bounds are checked by the models, with one-line errors."""

from __future__ import annotations

from typing import Annotated

import typer

from ..retrieval.settings import RetrievalSettings, flag

__all__ = ["DEFAULTS", "option"]

_FIELDS = RetrievalSettings.model_fields
DEFAULTS = {name: f.default for name, f in _FIELDS.items()}


def option(
    name: str, *decls: str, help: str | None = None, fields: dict | None = None
) -> typer.models.OptionInfo:
    """The typer option of settings field ``name`` (flag ``--name-with-dashes`` unless given)."""
    return typer.Option(*(decls or (flag(name),)), help=help or (fields or _FIELDS)[name].description)


LimitOpt = Annotated[int | None, option("limit")]
SampleOpt = Annotated[int | None, option("sample")]
SandboxOpt = Annotated[str, option("sandbox")]
SandboxWorkersOpt = Annotated[int | None, option("sandbox_workers")]
RayOpt = Annotated[str | None, option("ray")]
TimeoutOpt = Annotated[float, option("timeout")]
SeedOpt = Annotated[int, option("seed")]
StoreDirOpt = Annotated[str, option("store_dir")]
ChromaUrlOpt = Annotated[str | None, option("chroma_url")]
RerankOpt = Annotated[str | None, option("rerank")]
VisibleTestsOpt = Annotated[str, option("visible_tests")]
RerankKOpt = Annotated[int, option("rerank_k")]
