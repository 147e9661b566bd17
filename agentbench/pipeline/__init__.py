"""The end-to-end run: retrieval, reranking, generation under each condition, execution, records."""

from .conditions import DEFAULT_CONDITIONS, Condition, Context, PlanInputs, get_condition, register
from .config import RUN_SCHEMA_VERSION, RunConfig
from .evaluate import RunResult, run_pipeline
from .records import RecordLog, RunRecord
from .rundir import RunDirectory

__all__ = [
    "DEFAULT_CONDITIONS",
    "RUN_SCHEMA_VERSION",
    "Condition",
    "Context",
    "PlanInputs",
    "RunConfig",
    "RunDirectory",
    "RunResult",
    "RecordLog",
    "RunRecord",
    "get_condition",
    "register",
    "run_pipeline",
]
