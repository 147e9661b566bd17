"""Matrix runs: every (agent, retriever) combination of one set of run settings.

``agentbench run --llm A --llm B --embedder minilm --embedder bm25`` runs four combinations. Each is an
ordinary run (same records, same files) in its own run directory under the matrix directory, named by a
slug of the combination::

    <matrix>/matrix.json               the combinations and their settings (checked on --resume)
    <matrix>/<agent>__<retriever>/     one run directory per combination (see :mod:`.rundir`)
    <matrix>/leaderboard.{json,html}   written by the analysis layer

Why one process runs them all: the combinations share work. One sandbox executor serves every run; the
on-disk caches (executions, embeddings, LLM responses) key by content, so a snippet is embedded once per
embedder and a (code, asserts) pair is executed once; and the retrieval stage runs once per retriever, its
result handed to the runs of the other agents. A combination whose ``summary.json`` exists is complete
and is not run again on ``--resume``; the others continue from their records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, ModelError
from ..execution import make_executor
from ..execution.cache import ExecCache
from ..files import atomic_write_json, read_json_object, slug
from ..llm import DEFAULT_MODEL
from ..retrieval import DEFAULT_EMBEDDER
from ..retrieval.results import RetrievalResult
from .config import RunConfig
from .evaluate import RunResult, _make_agent, run_pipeline
from .rundir import CONFIG, MATRIX_MANIFEST, SUMMARY, check_writable_dir

__all__ = [
    "MANIFEST",
    "Entry",
    "Combination",
    "MatrixDirectory",
    "MatrixResult",
    "axis",
    "plan_matrix",
    "resolve_baseline",
    "check_combinations",
    "run_matrix",
]

log = logging.getLogger(__name__)

MANIFEST = MATRIX_MANIFEST
MATRIX_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One value of an axis: an LLM or agent plug-in (the agent axis), an embedder or retriever plug-in
    (the retriever axis). ``obj`` is a plug-in object given to the Python API (``name`` is its name)."""

    kind: Literal["llm", "agent", "embedder", "retriever"]
    name: str
    obj: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class Combination:
    index: int
    """1-based position in the matrix (the leaderboard's ``#``)"""
    agent: Entry
    retriever: Entry
    name: str
    """its run directory's name under the matrix directory"""
    config: RunConfig

    @property
    def label(self) -> str:
        return f"{self.agent.name},{self.retriever.name}"

    def manifest_row(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "agent": self.agent.name,
            "agent_kind": self.agent.kind,
            "retriever": self.retriever.name,
            "retriever_kind": self.retriever.kind,
            "fingerprint": self.config.fingerprint(),
        }


@dataclass
class MatrixResult:
    """What a matrix produced; ``runs[i]`` is None for a combination that was already complete (resume).
    ``leaderboard`` is filled in by the layer above (:func:`agentbench.api.evaluate_matrix`)."""

    path: Path
    combinations: list[Combination]
    runs: list[RunResult | None]
    baseline: Combination
    leaderboard: Any = None

    def run_dir(self, combination: Combination) -> Path:
        return self.path / combination.name


def _named(value: Any, kind: str, concurrency: int) -> Entry:
    """A plug-in object gets its name now (strings are names already)."""
    if isinstance(value, str):
        return Entry(kind, value)  # type: ignore[arg-type]
    if kind == "agent":
        from ..agent.plugin import plugin_agent

        return Entry("agent", plugin_agent(value, concurrency).name, value)
    from ..retrieval.plugin import check_retriever

    obj, name = check_retriever(value)
    return Entry("retriever", name, obj)


def axis(
    builtins: Sequence[str],
    plugins: Sequence[Any],
    *,
    kind: Literal["agent", "retriever"],
    concurrency: int = 4,
) -> list[Entry]:
    """The values of one axis: the built-ins (LLMs or embedders) then the plug-ins; the default built-in
    when neither is given."""
    builtin_kind = "llm" if kind == "agent" else "embedder"
    entries = [Entry(builtin_kind, b) for b in builtins]  # type: ignore[arg-type]
    entries += [_named(p, kind, concurrency) for p in plugins]
    if not entries:
        entries = [Entry(builtin_kind, DEFAULT_MODEL if kind == "agent" else DEFAULT_EMBEDDER)]  # type: ignore[arg-type]
    return entries


def _flag(entry: Entry) -> str:
    return f"--{entry.kind} {entry.name}"


def plan_matrix(
    base: RunConfig, agents: Sequence[Entry], retrievers: Sequence[Entry], path: Path
) -> list[Combination]:
    """Every (agent, retriever) pair, agents outer, each with its validated RunConfig and run directory."""
    for values in (agents, retrievers):
        seen: set[tuple[str, str]] = set()
        for e in values:
            if (e.kind, e.name) in seen:
                raise ConfigError(f"{_flag(e)} is given twice: each combination runs once, drop the repeat")
            seen.add((e.kind, e.name))
    fields = base.model_dump(exclude={"llm", "embedder", "agent", "retriever", "run_dir"})
    combos: list[Combination] = []
    names: set[str] = set()
    for a in agents:
        for r in retrievers:
            index = len(combos) + 1
            name = f"{slug(a.name)}__{slug(r.name)}"
            if name in names:  # two names with the same slug (e.g. "a/b" and "a:b")
                name = f"{name}-{index}"
            names.add(name)
            config = RunConfig(
                **fields,
                llm=a.name if a.kind == "llm" else DEFAULT_MODEL,
                agent=a.name if a.kind == "agent" else None,
                embedder=r.name if r.kind == "embedder" else DEFAULT_EMBEDDER,
                retriever=r.name if r.kind == "retriever" else None,
                run_dir=str(path / name),
            )
            combos.append(Combination(index, a, r, name, config))
    return combos


def resolve_baseline(combos: Sequence[Combination], baseline: str | int | None) -> Combination:
    """``--baseline``: a 1-based index, a run directory name, ``AGENT,RETRIEVER``, or one axis value that
    names a single combination (``bm25`` in a one-LLM matrix); the first combination by default."""
    if baseline is None or baseline == "":
        return combos[0]
    text = str(baseline).strip()
    if text.isdigit():
        i = int(text)
        if 1 <= i <= len(combos):
            return combos[i - 1]
        raise ConfigError(
            f"--baseline {text} is out of range: the matrix has combinations 1 to {len(combos)}"
        )
    exact = [c for c in combos if text in (c.name, c.label)]
    if len(exact) == 1:
        return exact[0]
    partial = [c for c in combos if text in (c.agent.name, c.retriever.name)]
    if len(partial) == 1:
        return partial[0]
    if len(partial) > 1:
        raise ConfigError(
            f"--baseline {text!r} matches {len(partial)} combinations: name one as AGENT,RETRIEVER "
            f"(e.g. {partial[0].label!r}) or by its number"
        )
    raise ConfigError(
        f"unknown --baseline {text!r}: use a number from 1 to {len(combos)}, AGENT,RETRIEVER "
        f"(e.g. {combos[0].label!r}) or a run directory name (e.g. {combos[0].name!r})"
    )


class MatrixDirectory:
    """The matrix directory and its manifest; :meth:`prepare` checks, :meth:`write_manifest` commits."""

    def __init__(self, path: Path, combos: list[Combination]) -> None:
        self.path = path
        self.combos = combos

    @staticmethod
    def default_path() -> Path:
        return Path("runs") / f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-matrix"

    @classmethod
    def prepare(cls, path: Path, combos: list[Combination], *, resume: bool) -> MatrixDirectory:
        """Refuse to mix two matrices or to overwrite runs; nothing is written here."""
        check_writable_dir(path, "--run-dir")
        manifest = path / MANIFEST
        if (path / CONFIG).exists():
            raise ConfigError(f"{path} holds a single run, not a matrix: choose another --run-dir")
        if manifest.exists():
            if not resume:
                raise ConfigError(
                    f"{path} already holds a matrix: pass --resume to continue it or choose another --run-dir"
                )
            difference = _difference(read_json_object(manifest).get("combinations"), combos)
            if difference:
                raise ConfigError(
                    f"{path} holds a matrix started with different flags ({difference}); resume with the "
                    "same flags or choose another --run-dir"
                )
        elif resume and path.exists() and any(path.iterdir()):
            raise ConfigError(f"{path} has no {MANIFEST}; it is not an agentbench matrix directory")
        elif path.exists() and any(path.iterdir()):
            raise ConfigError(f"{path} is not empty: choose another --run-dir for the matrix")
        return cls(path, combos)

    def write_manifest(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            self.path / MANIFEST,
            {
                "schema_version": MATRIX_SCHEMA_VERSION,
                "combinations": [c.manifest_row() for c in self.combos],
            },
        )

    def is_complete(self, combo: Combination) -> bool:
        """A run's summary.json is written last: it exists only when every record is."""
        return (self.path / combo.name / SUMMARY).exists()


def _difference(previous: Any, combos: list[Combination]) -> str | None:
    """What differs between a manifest's combinations and these (None: the same matrix)."""
    if not isinstance(previous, list):
        return "its manifest is unreadable"
    if len(previous) != len(combos):
        return f"it has {len(previous)} combinations, these flags give {len(combos)}"
    for old, c in zip(previous, combos, strict=True):
        row = c.manifest_row()
        if not isinstance(old, dict):
            return "its manifest is unreadable"
        if (old.get("agent"), old.get("retriever")) != (row["agent"], row["retriever"]):
            return f"combination {c.index} is {old.get('agent')},{old.get('retriever')} there, {c.label} here"
        if old.get("fingerprint") != row["fingerprint"]:
            return f"combination {c.index} ({c.label}) has different settings"
    return None


def check_combinations(combos: Sequence[Combination]) -> None:
    """Every agent, embedder and plug-in of the matrix is usable (keys, models, imports, templates): a
    problem with the last combination fails before the first one runs."""
    from ..retrieval import build_embedder
    from ..retrieval.plugin import check_retriever

    seen: set[Entry] = set()
    for c in combos:
        if c.agent not in seen:
            seen.add(c.agent)
            _make_agent(c.config, None, c.agent.obj)
        if c.retriever not in seen:
            seen.add(c.retriever)
            if c.retriever.kind == "embedder":
                build_embedder(c.config.embedder_spec).check()
            else:
                check_retriever(c.retriever.obj if c.retriever.obj is not None else c.retriever.name)


def run_matrix(
    directory: MatrixDirectory,
    *,
    resume: bool,
    finish: Callable[[RunResult], None],
    baseline: Combination,
    show_progress: bool = True,
) -> MatrixResult:
    """Run every combination not yet complete, sharing one executor, the caches and one retrieval stage
    per retriever; ``finish`` is called on each run as it ends (the layer above writes its summary)."""
    combos = directory.combos
    directory.write_manifest()
    first = combos[0].config
    runs: list[RunResult | None] = []
    retrievals: dict[Entry, RetrievalResult] = {}
    with (
        make_executor(first.sandbox, first.sandbox_workers, first.ray) as executor,
        ExecCache() as exec_cache,
    ):
        for c in combos:
            if directory.is_complete(c):
                log.info("combination %d/%d %s: already complete", c.index, len(combos), c.label)
                runs.append(None)
                continue
            log.info("combination %d/%d: %s", c.index, len(combos), c.label)
            config = c.config.model_copy(update={"resume": resume})
            try:
                result = run_pipeline(
                    config,
                    agent=c.agent.obj,
                    retriever=c.retriever.obj,
                    show_progress=show_progress,
                    executor=executor,
                    exec_cache=exec_cache,
                    retrieval=retrievals.get(c.retriever),
                )
            except ModelError as exc:  # fatal for the matrix: say how to continue all of it
                cause = exc.__cause__ if isinstance(exc.__cause__, ModelError) else exc
                raise type(cause)(
                    f"combination {c.index} ({c.label}): {cause}; finished records and combinations are kept "
                    f"in {directory.path}: fix this, then continue with --resume --run-dir {directory.path}"
                ) from exc
            retrievals.setdefault(c.retriever, result.retrieval)
            finish(result)
            runs.append(result)
    return MatrixResult(directory.path, list(combos), runs, baseline)
