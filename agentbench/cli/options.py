"""Command-line options shared by ``agentbench retrieve`` and ``agentbench run``, built from the settings
models so that a default or a help text is declared once (in :mod:`agentbench.retrieval.settings` and
:mod:`agentbench.pipeline.config`); bounds are checked by the models, with one-line errors.

Also the checks of output locations (``--out``, ``--html``) that commands make before any work, so that
an unwritable path fails in a second with one line instead of after the work, losing it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ConfigError
from ..pools.io import BUNDLED_POOLS
from ..retrieval.settings import RetrievalSettings, flag

__all__ = ["DEFAULTS", "POOL_HELP", "PoolOpt", "option", "check_output_dir", "check_output_file"]

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

POOL_HELP = (
    f"A bundled pool ({', '.join(f'`{name}`' for name in BUNDLED_POOLS)}), `execretrieval` (downloaded "
    "from Hugging Face on first use) or a pool directory (from `pool build` or `pool mine`)."
)
"""The ``--pool`` help of ``run`` and ``retrieve``, naming the pools shipped with the package."""
PoolOpt = Annotated[str, typer.Option("--pool", help=POOL_HELP)]


def _writable_parent(path: Path, name: str, start: Path | None = None) -> Path:
    """The nearest existing directory at or above ``start`` (default ``path``), after checking that it
    is not a file and that a file can be created in it (a probe, removed at once: it catches read-only
    file systems, permissions and a full disk, for root too)."""
    from ..cache import write_problem

    here = (start or path).absolute()
    for existing in (here, *here.parents):
        if existing.exists():
            break
    if not existing.is_dir():
        raise ConfigError(
            f"{name} {path}: {existing} is a file, not a directory; pass a path that is not below a file"
        )
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".agentbench-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(
            f"{name} {path}: cannot write in {existing} ({write_problem(existing, exc)}); pass a writable location"
        ) from exc
    return existing


def check_output_dir(path: Path, name: str) -> Path:
    """Check that directory ``path`` (given as option ``name``) exists or can be created and written;
    nothing is created. One-line ConfigError otherwise."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{name} {path} is a file, not a directory; pass a directory path")
    _writable_parent(path, name)
    return path


def check_output_file(path: Path, name: str, example: str = "report.html") -> Path:
    """Check that file ``path`` (given as option ``name``) can be written (replacing a regular file
    there); nothing is created. One-line ConfigError otherwise."""
    if path.is_dir():
        raise ConfigError(f"{name} {path} is a directory; pass a file path such as {path / example}")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{name} {path} is not a regular file; pass a file path such as {example}")
    _writable_parent(path, name, start=path.parent)
    return path
