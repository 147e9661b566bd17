"""The end-to-end run: retrieval, reranking, generation under each condition, execution, records.

Names load on first use (PEP 562): the CLI declares its options from :class:`RunConfig` without importing
:mod:`.evaluate` and the libraries it needs (numpy, the stores, the LLM client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_CONDITIONS": "conditions",
    "Condition": "conditions",
    "Context": "conditions",
    "PlanInputs": "conditions",
    "get_condition": "conditions",
    "register": "conditions",
    "RUN_SCHEMA_VERSION": "config",
    "RunConfig": "config",
    "RunResult": "evaluate",
    "run_pipeline": "evaluate",
    "RecordLog": "records",
    "RunRecord": "records",
    "RunDirectory": "rundir",
}

__all__ = [
    "DEFAULT_CONDITIONS",
    "RUN_SCHEMA_VERSION",
    "Condition",
    "Context",
    "PlanInputs",
    "RecordLog",
    "RunConfig",
    "RunDirectory",
    "RunRecord",
    "RunResult",
    "get_condition",
    "register",
    "run_pipeline",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .conditions import (
        DEFAULT_CONDITIONS,
        Condition,
        Context,
        PlanInputs,
        get_condition,
        register,
    )
    from .config import RUN_SCHEMA_VERSION, RunConfig
    from .evaluate import RunResult, run_pipeline
    from .records import RecordLog, RunRecord
    from .rundir import RunDirectory
