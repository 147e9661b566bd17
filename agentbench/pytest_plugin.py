"""pytest plugin: evaluate your agent and retriever plug-ins inside a test and assert that they are not
worse than a committed baseline run (the paired gates of ``agentbench check --non-inferior``).

    def test_agent_not_worse(agentbench_eval):
        run = agentbench_eval(pool="core", agent="mytools.agent:agent", conditions=["rag"], limit=100)
        run.assert_non_inferior("ci/baseline", "rag.pass", 0.05)

A failed gate fails the test with the comparison table (difference, 95% interval, n, discordant pairs,
verdict) as its message; ``pytest --junitxml`` carries it into JUnit like any failure. Options:
``--agentbench-baseline DIR`` (or the ini option ``agentbench_baseline``, relative to the rootdir) is the
default baseline; ``--agentbench-save-baseline`` writes each run to its baseline directory instead of
comparing, which is how the baseline is made and refreshed.

Registered through the ``pytest11`` entry point, so it loads in every pytest session of anyone who
installs agentbench: importing it costs only pytest and the standard library (agentbench itself is
imported when the fixture is used), and it defines no autouse fixture and changes no environment.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["AgentbenchRun", "agentbench_eval", "BASELINE_FILES"]

BASELINE_FILES = ("config.json", "retrieval.json", "records.jsonl", "summary.json")
"""The files of a run directory that make a baseline (docs/ci.md: commit them as ci/baseline/)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentbench", "agentbench evaluations (agentbench_eval fixture)")
    group.addoption(
        "--agentbench-baseline",
        dest="agentbench_baseline",
        metavar="DIR",
        default=None,
        help="Baseline run directory that agentbench_eval runs are compared with by default.",
    )
    group.addoption(
        "--agentbench-save-baseline",
        dest="agentbench_save_baseline",
        action="store_true",
        default=False,
        help="Write each run's config.json, retrieval.json, records.jsonl and summary.json to its baseline "
        "directory instead of comparing with it.",
    )
    parser.addini("agentbench_baseline", "Default baseline run directory (relative to the rootdir).")


@contextmanager
def _as_test_failure() -> Iterator[None]:
    """agentbench's one-line input errors fail the test with that line, not a traceback into agentbench."""
    from agentbench.errors import AgentbenchError

    try:
        yield
    except AgentbenchError as exc:
        pytest.fail(f"agentbench: {exc}", pytrace=False)


class AgentbenchRun:
    """A finished evaluation (``result`` is the :class:`agentbench.RunResult`) and its gates."""

    def __init__(self, result: Any, config: pytest.Config) -> None:
        self.result = result
        self._config = config

    @property
    def run_dir(self) -> Path:
        return Path(self.result.run_dir)

    @property
    def summary(self) -> Any:
        return self.result.summary

    def pass_rate(self, condition: str) -> float | None:
        """A condition's pass rate (None when no record of it was scored)."""
        return self.summary.conditions[condition].pass_rate

    def _baseline(self, baseline: str | Path | None) -> Path:
        if baseline is not None:
            return Path(baseline)
        option = self._config.getoption("agentbench_baseline")
        if option:
            return Path(option)
        ini = self._config.getini("agentbench_baseline")
        if ini:
            return self._config.rootpath / str(ini)
        pytest.fail(
            "agentbench: no baseline: pass the baseline run directory, or set --agentbench-baseline DIR or "
            "the ini option agentbench_baseline",
            pytrace=False,
        )

    def _save(self, baseline: Path) -> None:
        baseline.mkdir(parents=True, exist_ok=True)
        for name in BASELINE_FILES:
            source = self.run_dir / name
            if source.exists():
                shutil.copyfile(source, baseline / name)

    def check(
        self,
        baseline: str | Path | None = None,
        *,
        non_inferior: dict[str, float] | None = None,
        superior: dict[str, float] | None = None,
        allow_inconclusive: bool = False,
    ) -> list[Any]:
        """Every gate against ``baseline``, as ``agentbench check --baseline DIR --non-inferior M=V
        --superior M=V`` computes them; fails the test with the comparison table when one fails. Returns
        the :class:`~agentbench.analysis.noninferiority.PairedResult` list (empty with
        ``--agentbench-save-baseline``, which writes the run to ``baseline`` instead)."""
        base_dir = self._baseline(baseline)
        if self._config.getoption("agentbench_save_baseline"):
            self._save(base_dir)
            return []
        with _as_test_failure():
            results = self._gate(base_dir, non_inferior or {}, superior or {}, allow_inconclusive)
        failed = [r for r in results if not r.ok]
        if failed:
            pytest.fail(_failure_text(failed, results, base_dir, self.run_dir), pytrace=False)
        return results

    def _gate(
        self, base_dir: Path, non_inferior: dict[str, float], superior: dict[str, float], allow: bool
    ) -> list[Any]:
        from agentbench.analysis.compare import load_run
        from agentbench.analysis.noninferiority import gate_runs
        from agentbench.cli.check import check_scoring, load_baseline, parse_paired
        from agentbench.errors import ConfigError

        specs = parse_paired(
            [f"{m}={v}" for m, v in non_inferior.items()], [f"{m}={v}" for m, v in superior.items()]
        )
        if not specs:
            raise ConfigError("nothing to check: give non_inferior={METRIC: MARGIN} or superior=...")
        if not (base_dir / "config.json").exists():
            raise ConfigError(
                f"the baseline {base_dir} holds no run: make it with pytest --agentbench-save-baseline"
            )
        run = load_run(self.run_dir)
        base = load_baseline(self.run_dir, run.config.pool, base_dir)
        check_scoring(self.run_dir, run.retrieval, base)
        return gate_runs(run, base, specs, allow_inconclusive=allow)

    def assert_non_inferior(
        self,
        baseline: str | Path | None = None,
        metric: str = "rag.pass",
        margin: float = 0.05,
        *,
        allow_inconclusive: bool = False,
    ) -> Any:
        """Fail unless the run is not worse than ``baseline`` on ``metric`` by more than ``margin``: the
        lower bound of the paired 95% interval of (run - baseline) lies above -margin."""
        results = self.check(baseline, non_inferior={metric: margin}, allow_inconclusive=allow_inconclusive)
        return results[0] if results else None

    def assert_superior(
        self,
        baseline: str | Path | None = None,
        metric: str = "rag.pass",
        margin: float = 0.02,
        *,
        allow_inconclusive: bool = False,
    ) -> Any:
        """Fail unless the lower bound of the paired 95% interval of (run - baseline) lies above +margin."""
        results = self.check(baseline, superior={metric: margin}, allow_inconclusive=allow_inconclusive)
        return results[0] if results else None


def _failure_text(failed: Sequence[Any], results: Sequence[Any], baseline: Path, run_dir: Path) -> str:
    from agentbench.analysis.markdown import paired_table

    lines = [
        f"agentbench: {len(failed)} of {len(results)} gate(s) failed against the baseline {baseline} "
        f"(run: {run_dir})",
        "",
        paired_table([r.to_dict() for r in results]),
    ]
    lines += [f"missing: {m}" for r in failed for m in r.missing]
    return "\n".join(lines)


@pytest.fixture
def agentbench_eval(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Callable:
    """A callable that runs ``agentbench.evaluate`` (same keyword arguments: ``pool``, ``agent``,
    ``retriever``, ``conditions``, ``llm``, ``limit``, ``sandbox``, ``run_dir``, ...) and returns an
    :class:`AgentbenchRun`; ``run_dir`` defaults to a fresh temporary directory."""

    def evaluate(pool: str = "core", *, run_dir: str | Path | None = None, **options: Any) -> AgentbenchRun:
        import agentbench

        if run_dir is None:
            run_dir = tmp_path_factory.mktemp("agentbench") / "run"
        with _as_test_failure():
            result = agentbench.evaluate(pool, run_dir=run_dir, **options)
        return AgentbenchRun(result, request.config)

    return evaluate
