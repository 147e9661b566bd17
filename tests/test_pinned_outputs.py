"""Output formats pinned byte for byte (apart from timings, paths and added fields).

``summary.json``, ``retrieval.json`` and ``records.jsonl`` of a scripted-provider run (with and without
``--rerank``) and the results file of ``agentbench.retrieve`` are compared with files recorded before the
typed-boundaries refactor (issue 16): CI consumers read these files, so a refactor may add fields but
never change or drop one. Regenerate deliberately with ``AGENTBENCH_REGEN_GOLDEN=1`` after a format
change that is meant, and say so in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import agentbench
from agentbench.api import evaluate_config as evaluate
from agentbench.llm import LLMClient
from agentbench.llm._litellm import register_provider
from agentbench.pipeline import RunConfig

from .conftest import ROOT
from .test_pipeline import Copycat

GOLDEN = Path(__file__).parent / "golden"
_TIMINGS = {"seconds", "sandbox_seconds", "llm_seconds", "exec_seconds"}
_PATHS = {"pool_path", "run_dir", "store_dir"}
_RECORD_TIMINGS = {"cached", "llm_seconds", "exec_seconds", "seconds"}


def _normalise(value: Any, key: str = "") -> Any:
    """Wall-clock timings, machine paths and the executor's identity (worker count, harness hash)
    differ between machines and runs; everything else must not."""
    if isinstance(value, dict):
        if key == "timing":
            return {k: "<t>" for k in value}
        return {k: _normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, key) for v in value]
    if key in _TIMINGS and isinstance(value, int | float):
        return "<t>"
    if key in _PATHS and isinstance(value, str):
        return "<path>"
    if key == "executor" and isinstance(value, str):
        return value.split(":", 1)[0]
    return value


def _contained(golden: Any, actual: Any, where: str = "$") -> list[str]:
    """Differences where ``actual`` changes or drops something of ``golden`` (added keys are allowed)."""
    if isinstance(golden, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {type(actual).__name__}"]
        out: list[str] = []
        for k, v in golden.items():
            if k not in actual:
                out.append(f"{where}.{k}: missing")
            else:
                out += _contained(v, actual[k], f"{where}.{k}")
        return out
    if isinstance(golden, list):
        if not isinstance(actual, list) or len(actual) != len(golden):
            return [f"{where}: expected a list of {len(golden)}, got {actual!r:.80}"]
        return [
            d
            for i, (g, a) in enumerate(zip(golden, actual, strict=True))
            for d in _contained(g, a, f"{where}[{i}]")
        ]
    if golden != actual or type(golden) is not type(actual):
        return [f"{where}: expected {golden!r:.80}, got {actual!r:.80}"]
    return []


def _check(name: str, actual: Any) -> None:
    actual = _normalise(actual)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("AGENTBENCH_REGEN_GOLDEN"):
        path.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    golden = json.loads(path.read_text())
    diffs = _contained(golden, actual)
    assert not diffs, f"{name}: {len(diffs)} difference(s), first: " + "; ".join(diffs[:5])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pinned")
    old = os.environ.get("AGENTBENCH_CACHE_DIR")
    os.environ["AGENTBENCH_CACHE_DIR"] = str(out / "cache")  # cold caches: call counts are part of the pin
    try:
        for name, extra in (("plain", {}), ("rerank", {"rerank": "exec-visible"})):
            register_provider("copycat", Copycat())
            config = RunConfig(
                llm="copycat/m",
                embedder="bm25",
                limit=6,
                sandbox="process",
                run_dir=str(out / name),
                concurrency=2,
                store_dir=str(out / "stores"),
                **extra,
            )
            evaluate(config, client=LLMClient("copycat/m", concurrency=2), show_progress=False)
        result = agentbench.retrieve(
            pool="core", embedder="bm25", limit=6, sandbox="process", store_dir=out / "stores"
        )
        result = result if isinstance(result, dict) else json.loads(result.model_dump_json())
        (out / "retrieve.json").write_text(json.dumps(result))
    finally:
        if old is None:
            os.environ.pop("AGENTBENCH_CACHE_DIR", None)
        else:
            os.environ["AGENTBENCH_CACHE_DIR"] = old
    return out


@pytest.mark.parametrize("run", ["plain", "rerank"])
@pytest.mark.parametrize("file", ["summary", "retrieval"])
def test_run_files_are_pinned(outputs: Path, run: str, file: str) -> None:
    _check(f"{run}_{file}", json.loads((outputs / run / f"{file}.json").read_text()))


@pytest.mark.parametrize("run", ["plain", "rerank"])
def test_records_are_pinned(outputs: Path, run: str) -> None:
    lines = (outputs / run / "records.jsonl").read_text().splitlines()
    records = [{k: v for k, v in json.loads(line).items() if k not in _RECORD_TIMINGS} for line in lines]
    _check(f"{run}_records", sorted(records, key=lambda r: (r["condition"], r["query_id"])))


def test_retrieve_results_file_is_pinned(outputs: Path) -> None:
    _check("retrieve", json.loads((outputs / "retrieve.json").read_text()))


def test_normalising_keeps_what_matters() -> None:
    """The comparison can fail: a changed metric, a dropped key or a reordered list is reported."""
    golden = {"metrics": {"exec@1": 0.5}, "per_query": [{"query_id": "a"}, {"query_id": "b"}]}
    assert _contained(golden, {**golden, "added": 1}) == []
    assert _contained(golden, {"metrics": {"exec@1": 0.25}, "per_query": golden["per_query"]})
    assert _contained(golden, {"per_query": golden["per_query"]})
    assert _contained(golden, {"metrics": golden["metrics"], "per_query": golden["per_query"][::-1]})
    assert ROOT.exists()


def test_exported_json_schemas_are_current() -> None:
    """docs/schema/*.schema.json are what the models generate (rewrite: python -m agentbench.schemas)."""
    from agentbench.schemas import SCHEMAS, schema_text

    for name in SCHEMAS:
        path = ROOT / "docs" / "schema" / f"{name}.schema.json"
        assert path.read_text() == schema_text(name), f"{path} is stale: run python -m agentbench.schemas"


def test_pinned_files_validate_against_the_models(outputs: Path) -> None:
    """What a run writes reads back as the typed records, and equals them."""
    from agentbench.analysis.summary import RunSummary
    from agentbench.retrieval.results import RetrievalResult

    for run in ("plain", "rerank"):
        summary = json.loads((outputs / run / "summary.json").read_text())
        retrieval = json.loads((outputs / run / "retrieval.json").read_text())
        assert RunSummary.model_validate(summary).to_json_dict() == summary
        assert RetrievalResult.model_validate(retrieval).to_json_dict() == retrieval
    assert (RetrievalResult.model_validate(retrieval).rerank is not None) and "rerank" not in json.loads(
        (outputs / "plain" / "retrieval.json").read_text()
    )
