"""The run directory: the one type that reads and writes ``runs/<name>/``.

    config.json      the RunConfig (checked on --resume: same output-affecting settings)
    retrieval.json   the retrieval stage's results (ExecRetrieval's per-model schema)
    records.jsonl    one RunRecord per (query, condition), appended as they finish
    summary.json     the run summary (written last)
    report.md        the summary as text

Every whole-file write is atomic (:mod:`agentbench.files`); records are appended with fsync and a torn
last line is cut on the next open, so a killed run is always resumable.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write_json, atomic_write_text, read_json_object, slug
from ..retrieval.results import RetrievalResult
from .config import RunConfig
from .records import RecordLog, RunRecord

__all__ = ["RunDirectory"]

CONFIG, RETRIEVAL, RECORDS, SUMMARY, REPORT = (
    "config.json",
    "retrieval.json",
    "records.jsonl",
    "summary.json",
    "report.md",
)
MATRIX_MANIFEST = "matrix.json"
"""the manifest of a matrix directory (:mod:`.matrix`), which holds run directories but is not one"""


class RunDirectory:
    """A run directory and its configuration; use :meth:`create` to start or resume a run, :meth:`open`
    to read one."""

    def __init__(self, path: Path, config: RunConfig) -> None:
        self.path = path
        self.config = config
        self.records = RecordLog(path / RECORDS)

    @staticmethod
    def default_path(config: RunConfig) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        return Path("runs") / f"{stamp}-{slug(config.agent_name)}-{slug(config.retriever_name)}"

    @classmethod
    def create(cls, config: RunConfig) -> RunDirectory:
        """Create the directory, or reopen it with ``config.resume``; refuse to mix two configurations."""
        if config.run_dir:
            path = Path(config.run_dir)
        else:
            if config.resume:
                raise ConfigError("--resume needs --run-dir DIR naming the run to continue")
            path = cls.default_path(config)
        config_file = path / CONFIG
        if (path / MATRIX_MANIFEST).exists():
            raise ConfigError(
                f"{path} holds a matrix run: continue it with the same repeated --llm/--embedder flags and "
                "--resume, or choose another --run-dir"
            )
        if config_file.exists():
            if not config.resume:
                raise ConfigError(
                    f"{path} already holds a run: pass --resume to continue it or choose another --run-dir"
                )
            previous = cls._read_config(config_file, "choose another --run-dir")
            if previous.fingerprint() != config.fingerprint():
                raise ConfigError(
                    f"{path} was started with different settings; resume with the same flags or choose another --run-dir"
                )
        elif config.resume and path.exists() and any(path.iterdir()):
            raise ConfigError(f"{path} has no config.json; it is not an agentbench run directory")
        path.mkdir(parents=True, exist_ok=True)
        config = config.model_copy(update={"run_dir": str(path)})
        atomic_write_json(config_file, config.model_dump(mode="json"))
        return cls(path, config)

    @classmethod
    def open(cls, path: str | Path) -> RunDirectory:
        """An existing run directory, for reading."""
        path = Path(path)
        if not path.is_dir():
            raise ConfigError(f"{path} is not a directory; pass a run directory written by `agentbench run`")
        config_file = path / CONFIG
        if not config_file.exists():
            raise ConfigError(f"{path} has no config.json; it is not an agentbench run directory")
        return cls(path, cls._read_config(config_file))

    @staticmethod
    def _read_config(config_file: Path, fix: str = "") -> RunConfig:
        try:
            return RunConfig.model_validate_json(config_file.read_text())
        except (ValueError, ConfigError) as exc:
            detail = str(exc).splitlines()[0]
            raise ConfigError(
                f"{config_file} is unreadable: {detail}" + (f"; {fix}" if fix else "")
            ) from None

    # ------------------------------------------------------------------ files

    def write_retrieval(self, retrieval: Any) -> None:
        atomic_write_json(self.path / RETRIEVAL, _plain(retrieval))

    def read_retrieval(self) -> RetrievalResult | dict:
        """The retrieval results ({} when the run stopped before retrieval finished)."""
        path = self.path / RETRIEVAL
        if not path.exists():
            return {}
        return RetrievalResult.from_json_data(read_json_object(path), path)

    def load_records(self) -> list[RunRecord]:
        return self.records.load()

    def append_record(self, record: RunRecord) -> None:
        self.records.append(record)

    def append_records(self, records: list[RunRecord]) -> None:
        self.records.append_many(records)

    def write_summary(self, summary: Any) -> None:
        atomic_write_json(self.path / SUMMARY, _plain(summary))

    def read_summary(self) -> dict | None:
        path = self.path / SUMMARY
        return read_json_object(path) if path.exists() else None

    def write_report(self, text: str) -> None:
        atomic_write_text(self.path / REPORT, text)


def _plain(data: Any) -> Any:
    """Models are written as their JSON form; dicts as they are."""
    dump = getattr(data, "to_json_dict", None)
    return dump() if dump is not None else data
