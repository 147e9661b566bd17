"""Is a difference between two runs real? Paired statistics on the queries the runs share.

Sources are run directories (``config.json``, ``retrieval.json``, ``records.jsonl``) or retrieval results
files written by ``agentbench retrieve --out`` (a directory of such files stands for all of them). Each
source becomes per-query 0/1 outcomes per metric:

- ``exec@k`` for each cutoff both sources have (a query scores 1 when any of its top k passes its tests);
- ``<condition>.pass`` for each generation condition both runs have (records with ``llm_error`` or
  ``infra_error`` are left out, so a query counts only when it was scored in both runs), and
  ``<condition>.repair``: the same on the queries whose context snippet fails its tests;
- ``retrieval_induced_failures`` and ``retrieval_rescues`` when both runs have closed_book and rag: 1 when
  the query is one (closed_book passes, rag fails with a buggy top-1; closed_book fails, rag passes), so
  a new embedder that induces fewer failures shows a negative difference (lower is better).

For every metric, on the shared queries: the two rates and their difference (other minus baseline), the
discordant pairs, an exact McNemar p-value (a two-sided binomial test of the discordant pairs at 1/2; 1.0
when there are none) and a seeded paired-bootstrap 95% percentile interval of the difference (queries
resampled with replacement, the same resample for both runs). With more than two sources, each is compared
with the first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from ..errors import ConfigError
from ..files import read_json_object
from ..pipeline.config import RunConfig
from ..pipeline.records import RunRecord
from ..pipeline.rundir import RunDirectory
from ..retrieval.results import RetrievalResult
from .attribution import query_outcomes, retrieval_indicators
from .passk import query_passes
from .summary import SUMMARY_VERSION, RunSummary

__all__ = [
    "RunData",
    "Source",
    "Comparison",
    "load_run",
    "load_sources",
    "run_source",
    "paired_stats",
    "compare_sources",
    "scoring",
    "N_RESAMPLES",
    "format_p",
]


def format_p(p: float | None) -> str:
    """A p-value for a table: three significant digits, scientific below 0.001, ``-`` when undefined."""
    if p is None:
        return "-"
    return f"{p:.3g}" if p >= 0.001 else f"{p:.1e}"


N_RESAMPLES = 5000
TOP_RESULTS = 10  # per query in a retrieval results file (agentbench.retrieval.evaluate.TOP_RESULTS)


@dataclass
class RunData:
    """A run directory as loaded from disk; ``summary`` is recomputed when summary.json is missing."""

    path: Path
    config: RunConfig
    retrieval: RetrievalResult | None
    """None when the run stopped before its retrieval finished"""
    records: list[RunRecord]
    summary: RunSummary


@dataclass
class Source:
    """Per-query 0/1 outcomes of one run or retrieval results file."""

    name: str
    path: Path
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    """metric -> query_id -> 0/1"""
    queries: dict[str, str] = field(default_factory=dict)
    """query_id -> query text, to refuse pairing queries of different pools that share ids"""
    scoring: str = "all asserts"
    """Which asserts the outcomes are on (``--rerank`` runs score on held-out asserts)."""


@dataclass
class Comparison:
    metric: str
    baseline: str
    other: str
    n: int
    baseline_rate: float | None
    other_rate: float | None
    difference: float | None
    """other minus baseline"""
    baseline_only: int
    """queries the baseline gets right and the other gets wrong"""
    other_only: int
    p_value: float | None
    ci95: list[float] | None

    def to_dict(self) -> dict:
        return asdict(self)


def load_run(path: str | Path) -> RunData:
    """Load a run directory; a run killed before its summary was written is summarised from its records."""
    from .propagation import summarize

    directory = RunDirectory.open(path)
    config = directory.config
    retrieval = directory.read_retrieval() or None
    records = directory.load_records()
    data = directory.read_summary()
    if data is not None and (data.get("schema_version", 0) >= SUMMARY_VERSION or not (records or retrieval)):
        summary = RunSummary.from_json_data(data, directory.path / "summary.json")
    elif data is not None:
        # an older summary lacks newer sections (attribution): recompute it from the records, keeping
        # the LLM call counts that only the original run knew
        llm = data.get("llm") if isinstance(data.get("llm"), dict) else {}
        summary = summarize(records, retrieval, {k: llm.get(k, 0) for k in ("calls", "cache_hits")}, config)
    elif records or retrieval:
        summary = summarize(records, retrieval, {}, config)
    else:
        raise ConfigError(f"{directory.path} has neither records nor a summary yet; nothing to report")
    return RunData(directory.path, config, retrieval, records, summary)


def _json(retrieval: RetrievalResult | dict | None) -> dict:
    """Retrieval results in their JSON form: the outcomes below are read the same way from a run's
    records and from a results file of any origin (which may lack fields agentbench always writes)."""
    if retrieval is None:
        return {}
    return retrieval.to_json_dict() if isinstance(retrieval, RetrievalResult) else retrieval


def _exec_outcomes(retrieval: dict) -> dict[str, dict[str, int]]:
    ks = [k for k in retrieval.get("ks", []) if isinstance(k, int)]
    per_query = retrieval.get("per_query", [])
    out: dict[str, dict[str, int]] = {}
    for k in ks:
        if k > TOP_RESULTS:  # the file keeps only the top results; deeper cutoffs cannot be recomputed
            continue
        out[f"exec@{k}"] = {
            q["query_id"]: int(any(r.get("passes_all_tests") for r in q.get("top_results", [])[:k]))
            for q in per_query
        }
    return out


def scoring(retrieval: RetrievalResult | dict | None) -> str:
    """Which asserts a retrieval result (and its run) is scored on."""
    retrieval = _json(retrieval)
    if (retrieval.get("run_info") or {}).get("scored_on", "all") == "all":
        return "all asserts"
    rr = retrieval.get("rerank") or {}
    return f"held-out asserts (--visible-tests {rr.get('visible_tests')}, seed {rr.get('seed')})"


def _query_texts(retrieval: dict) -> dict[str, str]:
    return {q["query_id"]: q["query"] for q in retrieval.get("per_query", []) if "query" in q}


def _is_retrieval_results(data: dict) -> bool:
    return isinstance(data.get("per_query"), list) and "metrics" in data


def _retrieval_source(path: Path, data: dict | None = None) -> Source:
    data = data if data is not None else read_json_object(path)
    if not _is_retrieval_results(data):
        raise ConfigError(
            f"{path} is not a retrieval results file (no per_query list); see `agentbench retrieve --out`"
        )
    name = str(data.get("model") or path.stem)
    return Source(name, path, _exec_outcomes(data), _query_texts(data), scoring(data))


def run_source(run: RunData) -> Source:
    """Per-query outcomes of a loaded run (exec@k, each condition's pass and repair, retrieval effects)."""
    retrieval = _json(run.retrieval)
    outcomes = _exec_outcomes(retrieval)
    for condition in run.config.conditions:
        group = [r for r in run.records if r.condition == condition and r.scored]
        outcomes[f"{condition}.pass"] = _per_query(group)
        # the condition's pass on the queries whose context snippet fails its tests
        repaired = _per_query([r for r in group if r.context_passes is False])
        if repaired:
            outcomes[f"{condition}.repair"] = repaired
    for name, by_query in retrieval_indicators(query_outcomes(run.records)).items():
        if by_query:
            outcomes[name] = by_query
    return Source(
        run.path.name or str(run.path),
        run.path,
        outcomes,
        _query_texts(retrieval),
        scoring(retrieval),
    )


def _per_query(records: list[RunRecord]) -> dict[str, float]:
    """query_id -> 0/1 pass; with repeated samples (``--samples``), the pass fraction of its samples."""
    if all(r.sample is None for r in records):
        return {r.query_id: int(r.passed) for r in records}
    return {q: c / n for (q, _), (c, n) in query_passes(records).items() if n}


def load_sources(paths: list[str | Path]) -> list[Source]:
    """Run directories, retrieval results files, or directories of retrieval results files."""
    sources: list[Source] = []
    for p in map(Path, paths):
        if p.is_dir() and (p / "config.json").exists():
            sources.append(run_source(load_run(p)))
        elif p.is_dir():
            files = sorted(p.glob("*.json"))
            found = [(f, d) for f in files if _is_retrieval_results(d := read_json_object(f))]
            if not found:
                raise ConfigError(
                    f"{p} is neither a run directory nor a directory of retrieval results files"
                )
            sources.extend(_retrieval_source(f, d) for f, d in found)
        elif p.is_file():
            sources.append(_retrieval_source(p))
        else:
            raise ConfigError(f"{p} does not exist")
    names = [s.name for s in sources]
    for s in sources:  # make labels unique ("bm25" twice -> use the paths)
        if names.count(s.name) > 1:
            s.name = str(s.path)
    return sources


def paired_stats(a: list[float], b: list[float], *, seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict:
    """Rates, difference (b - a), discordant counts, exact McNemar p and paired-bootstrap 95% CI. On
    per-query pass fractions (``--samples``) the rates are mean fractions, the discordant counts the
    queries where one side's fraction is higher, and the p the sign test of the differences (McNemar's
    on 0/1 outcomes)."""
    if len(a) != len(b):
        raise ValueError("paired outcomes must have the same length")
    n = len(a)
    if n == 0:
        return {
            "n": 0,
            "baseline_rate": None,
            "other_rate": None,
            "difference": None,
            "baseline_only": 0,
            "other_only": 0,
            "p_value": None,
            "ci95": None,
        }
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    baseline_only = int(np.sum(x > y))
    other_only = int(np.sum(y > x))
    discordant = baseline_only + other_only
    p = float(binomtest(other_only, discordant, 0.5).pvalue) if discordant else 1.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    diffs = (y - x)[idx].mean(axis=1)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return {
        "n": n,
        "baseline_rate": float(x.mean()),
        "other_rate": float(y.mean()),
        "difference": float(y.mean() - x.mean()),
        "baseline_only": baseline_only,
        "other_only": other_only,
        "p_value": min(p, 1.0),
        "ci95": [float(lo), float(hi)],
    }


def compare_sources(
    sources: list[Source], *, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> list[Comparison]:
    """Each source after the first against the first, metric by metric, on shared queries."""
    if len(sources) < 2:
        raise ConfigError("compare needs at least two runs or retrieval results files")
    base = sources[0]
    out: list[Comparison] = []
    for other in sources[1:]:
        if base.scoring != other.scoring:
            raise ConfigError(
                f"{base.name} is scored on {base.scoring} but {other.name} on {other.scoring}: "
                "their outcomes are not comparable"
            )
        differ = [q for q in base.queries if q in other.queries and base.queries[q] != other.queries[q]]
        if differ:
            raise ConfigError(
                f"{base.name} and {other.name} have different queries under the same id ({differ[0]}, "
                f"{len(differ)} in all): they were run on different pools and cannot be paired"
            )
        metrics = [m for m in base.outcomes if m in other.outcomes]  # exec@k by k, then conditions
        if not metrics:
            raise ConfigError(f"{base.name} and {other.name} have no metric in common")
        for metric in metrics:
            a, b = base.outcomes[metric], other.outcomes[metric]
            shared = sorted(set(a) & set(b))
            stats = paired_stats(
                [a[q] for q in shared], [b[q] for q in shared], seed=seed, n_resamples=n_resamples
            )
            out.append(Comparison(metric=metric, baseline=base.name, other=other.name, **stats))
    if all(c.n == 0 for c in out):
        raise ConfigError("the sources share no queries; were they run on the same pool?")
    return out
