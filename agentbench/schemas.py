"""JSON Schemas of the files agentbench writes, for CI consumers (``docs/schema/``).

    python -m agentbench.schemas docs/schema     # rewrite them after a format change

A test keeps the committed files equal to what the models generate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from .analysis.leaderboard import LEADERBOARD_VERSION, Leaderboard
from .analysis.summary import SUMMARY_VERSION, RunSummary
from .files import atomic_write_text
from .pipeline.config import RUN_SCHEMA_VERSION, RunConfig
from .retrieval.results import RESULTS_VERSION, RetrievalResult

__all__ = ["SCHEMAS", "schema_text", "export"]

SCHEMAS: dict[str, tuple[type[BaseModel], int]] = {
    "summary": (RunSummary, SUMMARY_VERSION),
    "retrieval": (RetrievalResult, RESULTS_VERSION),
    "config": (RunConfig, RUN_SCHEMA_VERSION),
    "leaderboard": (Leaderboard, LEADERBOARD_VERSION),
}
"""file stem -> (model, schema_version): ``summary.json``, ``retrieval.json`` (and ``agentbench retrieve``
results files), ``config.json``, a matrix run's ``leaderboard.json``"""


def schema_text(name: str) -> str:
    model, version = SCHEMAS[name]
    schema = model.model_json_schema(by_alias=True, mode="validation")
    schema["$comment"] = f"agentbench {name}.json, schema_version {version}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def export(directory: str | Path) -> list[Path]:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out / f"{name}.schema.json", schema_text(name)) for name in SCHEMAS]


if __name__ == "__main__":
    for path in export(sys.argv[1] if len(sys.argv) > 1 else "docs/schema"):
        print(path)
