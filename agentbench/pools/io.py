"""Reading and writing pools in the ExecRetrieval JSONL layout.

Reading never stops at the first bad row: every problem is collected with its file and line so that
``pool validate`` can report them all. Writing goes through a temporary file per JSONL file and an atomic
rename, so an interrupted write never leaves a half-written pool behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..errors import PoolError
from ..files import atomic_write_text
from .diff import edit_between
from .models import DistractorMeta, ExecCacheRow, Pool, Query, Snippet
from .problems import Problem, ScanResult

__all__ = [
    "Problem",
    "ScanResult",
    "scan_pool",
    "load_pool",
    "resolve_pool_path",
    "write_pool",
    "POOL_FILES",
    "CORE_POOL_DIR",
    "HUMANEVAL_POOL_DIR",
    "BUNDLED_POOLS",
]

CORE_POOL_DIR = Path(__file__).parent / "core" / "pool"
CORE_SOURCES_DIR = Path(__file__).parent / "core" / "sources"
HUMANEVAL_POOL_DIR = Path(__file__).parent / "humaneval" / "pool"
BUNDLED_POOLS = {"core": CORE_POOL_DIR, "humaneval": HUMANEVAL_POOL_DIR}
"""Pools shipped with the package, by the name ``--pool`` takes."""
HF_DATASET = "anonpapersubmission01/execretrieval"

POOL_FILES: dict[str, tuple[type[BaseModel], bool]] = {
    "queries.jsonl": (Query, True),
    "corpus.jsonl": (Snippet, True),
    "distractor_metadata.jsonl": (DistractorMeta, False),
    "execution_cache.jsonl": (ExecCacheRow, False),
}


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "record"
    msg = first["msg"]
    if first["type"] == "missing":
        return f"missing required field {loc!r}"
    return f"field {loc!r}: {msg}"


def _read_jsonl(path: Path, model: type[BaseModel], problems: list[Problem]) -> list[tuple[int, BaseModel]]:
    rows: list[tuple[int, BaseModel]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(path.name, None, f"not UTF-8 text ({exc.reason}); re-save the file as UTF-8"))
        return rows
    except OSError as exc:
        problems.append(Problem(path.name, None, f"cannot read: {exc.strerror}"))
        return rows
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(path.name, lineno, f"invalid JSON ({exc.msg} at column {exc.colno})"))
            continue
        if not isinstance(data, dict):
            problems.append(Problem(path.name, lineno, f"expected a JSON object, got {type(data).__name__}"))
            continue
        try:
            rows.append((lineno, model.model_validate(data)))
        except ValidationError as exc:
            problems.append(Problem(path.name, lineno, _describe(exc)))
    return rows


def scan_pool(path: Path) -> ScanResult:
    """Read every pool file under ``path``, collecting problems instead of raising."""
    problems: list[Problem] = []
    locations: dict[tuple[str, str], int] = {}
    loaded: dict[str, list] = {}
    if not path.is_dir():
        raise PoolError(
            f"pool directory {path} does not exist: pass `core`, `humaneval`, `execretrieval` or a pool directory"
        )
    for name, (model, required) in POOL_FILES.items():
        file = path / name
        if not file.exists():
            if required:
                problems.append(Problem(name, None, "required file is missing"))
            loaded[name] = []
            continue
        rows = _read_jsonl(file, model, problems)
        key = {"queries.jsonl": "query_id", "corpus.jsonl": "corpus_id"}.get(name, "corpus_id")
        for lineno, row in rows:
            ident = getattr(row, key, None)
            if ident is not None and (name, ident) not in locations:
                locations[(name, ident)] = lineno
        loaded[name] = [row for _, row in rows]
    pool = Pool(
        name=path.name,
        path=str(path),
        queries=loaded["queries.jsonl"],
        corpus=loaded["corpus.jsonl"],
        distractors=loaded["distractor_metadata.jsonl"],
        exec_cache=loaded["execution_cache.jsonl"],
    )
    scan = ScanResult(pool, problems, locations)
    _derive_edits(scan)
    return scan


def _derive_edits(scan: ScanResult) -> None:
    """Fill in the mutated line of metadata rows that lack it (the released format has only ids and
    the bug type) from the diff against the canonical, and say so once."""
    snippets = {s.corpus_id: s for s in scan.pool.corpus}
    derived: list[str] = []
    for d in scan.pool.distractors:
        if d.has_line:
            continue
        mutant, canonical = snippets.get(d.corpus_id), snippets.get(d.canonical_corpus_id)
        if mutant is None or canonical is None:  # a reference problem, reported by the structural checks
            continue
        d.line_number, d.line_before, d.line_after = edit_between(canonical.code, mutant.code)
        derived.append(d.corpus_id)
    if derived:
        name = "distractor_metadata.jsonl"
        first = scan.locations.get((name, derived[0]))
        scan.warnings.append(
            Problem(
                name,
                first,
                f"{len(derived)} row(s) without line_number/line_before/line_after (first: {derived[0]}): "
                "derived from the diff against the canonical",
            )
        )


def resolve_pool_path(spec: str | os.PathLike[str]) -> Path:
    """`core`, `humaneval`, `execretrieval` or a directory -> a directory holding the pool files."""
    text = str(spec)
    if text in BUNDLED_POOLS:
        return BUNDLED_POOLS[text]
    if text == "execretrieval":
        return _download_execretrieval()
    path = Path(text).expanduser()
    if not path.exists():
        raise PoolError(
            f"pool {text!r} not found: pass `core`, `humaneval`, `execretrieval` or an existing pool directory"
        )
    if not path.is_dir():
        raise PoolError(
            f"pool {text!r} is a file: pass the directory that holds queries.jsonl and corpus.jsonl"
        )
    return path


def load_pool(spec: str | os.PathLike[str]) -> Pool:
    """Load a pool and refuse one with problems (run `pool validate` to see them all)."""
    from .validate import structural_problems

    path = resolve_pool_path(spec)
    scan = scan_pool(path)
    problems = scan.problems + structural_problems(scan)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PoolError(
            f"pool {path} is malformed: {problems[0]}{more}; run `agentbench pool validate {path}` for all"
        )
    return scan.pool


def _dump(records: Iterable[BaseModel]) -> str:
    return "".join(json.dumps(r.model_dump(exclude_none=True), ensure_ascii=False) + "\n" for r in records)


def write_pool(pool: Pool, out: Path) -> None:
    """Write the pool files atomically (each file is replaced whole or not at all)."""
    out.mkdir(parents=True, exist_ok=True)
    contents = {
        "queries.jsonl": _dump(pool.queries),
        "corpus.jsonl": _dump(pool.corpus),
        "distractor_metadata.jsonl": _dump(pool.distractors),
    }
    if pool.exec_cache:
        contents["execution_cache.jsonl"] = _dump(pool.exec_cache)
    for name, text in contents.items():
        atomic_write_text(out / name, text)


def _download_execretrieval() -> Path:
    """Fetch the public ExecRetrieval release from the Hugging Face hub (needs network)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError as exc:
        raise PoolError(
            "downloading execretrieval needs huggingface_hub: pip install huggingface_hub"
        ) from exc
    try:
        root = Path(
            snapshot_download(HF_DATASET, repo_type="dataset", allow_patterns=["*.jsonl", "**/*.jsonl"])
        )
    except LocalEntryNotFoundError as exc:
        raise PoolError(
            f"cannot download {HF_DATASET} (offline?): download it on a connected machine and pass --pool DIR"
        ) from exc
    except Exception as exc:  # network and hub errors
        raise PoolError(
            f"cannot download {HF_DATASET}: {type(exc).__name__}; check the network or pass --pool DIR"
        ) from exc
    found = {p.name: p for p in root.rglob("*.jsonl")}
    if "queries.jsonl" not in found or "corpus.jsonl" not in found:
        raise PoolError(f"{HF_DATASET} snapshot has no queries.jsonl/corpus.jsonl; pass --pool DIR instead")
    target = Path(found["queries.jsonl"]).parent
    if (target / "corpus.jsonl").exists():
        return target
    link_dir = root / "_agentbench_pool"
    link_dir.mkdir(exist_ok=True)
    for name in POOL_FILES:
        if name in found and not (link_dir / name).exists():
            (link_dir / name).symlink_to(found[name])
    return link_dir
