"""The end-to-end run: retrieval, generation under each condition, execution, records."""

from .config import RUN_SCHEMA_VERSION, RunConfig
from .evaluate import RunResult, evaluate, prepare_run_dir
from .records import RecordLog, RunRecord

__all__ = [
    "RUN_SCHEMA_VERSION",
    "RunConfig",
    "RunResult",
    "RecordLog",
    "RunRecord",
    "evaluate",
    "prepare_run_dir",
]
