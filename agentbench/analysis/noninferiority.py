"""Non-inferiority and superiority gates on paired per-query outcomes, and how many queries one needs.

Why: ``--max-drop`` compares two point values, so on 100 queries it passes or fails on noise. A
non-inferiority gate asks whether the data rule out a loss larger than a margin: it passes when the lower
bound of the paired 95% interval of (run - baseline), on the queries both runs scored, lies above
``-margin`` (``--superior``: above ``+margin``). An interval wholly on the other side says ``worse`` (``not
better``); one straddling the margin is ``inconclusive``, with about how many queries would decide it.
Outcomes are 0/1 per query with 1 = good (``retrieval_induced_failures``, lower is better, is flipped), so
a positive difference means the run is better. With ``b`` queries only the run gets right, ``c`` only the
baseline, of ``n``: difference = (b - c) / n.

Interval: Newcombe (1998) method 10 for paired proportions (Statistics in Medicine 17:2635-2650): Wilson
score intervals (l1, u1) of the run's rate p1 and (l2, u2) of the baseline's p2 (from scipy), combined with
the phi correlation of the paired table (a both right, d both wrong; phi = (ad - bc) /
sqrt((a+b)(c+d)(a+c)(b+d)), 0 when a margin is empty):

    lo = D - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
    hi = D + sqrt((p2 - l2)^2 - 2 phi (p2 - l2)(u1 - p1) + (u1 - p1)^2)

Closed-form (deterministic, checkable by hand) and sound with few discordant pairs, unlike Wald. Queries
needed: Connor's (1987, Biometrics 43:207-211) normal-approximation paired sample size with the margin
added, one-sided alpha 0.025, the observed d taken as true: n = (z_{1-alpha} + z_{power})^2 (psi - d^2) /
(d + margin)^2 (superior: (d - margin)^2), psi = (b + c) / n the discordance rate (1/n when no pair is
discordant); at least n + 1 (n did not suffice); none when d is on the wrong side of the margin.
With ``--samples`` outcomes are per-query pass fractions: a paired t interval of their differences (passk.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import ConfigError
from ..pipeline.records import ERROR_STATUSES, RunRecord
from ..retrieval.metrics import is_metric_name
from .gate import LOWER_IS_BETTER
from .passk import FRACTION_METHOD, paired_fraction_interval

if TYPE_CHECKING:
    from .compare import RunData

__all__ = ["MarginSpec", "PairedResult", "Plan", "parse_margins", "check_conditions", "paired_interval"]
__all__ += ["needed_queries", "paired_gate", "gate_runs", "plan_queries", "oriented", "missing_for"]

GateKind = Literal["non_inferior", "superior"]
ALPHA = 0.025  # one-sided: the lower bound of a two-sided 95% interval
METHOD = "Newcombe (1998) method 10, paired Wilson score"
FLAG = {"non_inferior": "--non-inferior", "superior": "--superior"}
_VERDICTS = {"non_inferior": ("not worse", "worse"), "superior": ("better", "not better")}
_PASS = re.compile(r"^[a-z][a-z0-9_]*\.pass$")
_FORMS = "exec@K (e.g. exec@1, exec@10), <condition>.pass (e.g. rag.pass, closed_book.pass), retrieval_induced_failures"


@dataclass(frozen=True)
class MarginSpec:
    """One ``--non-inferior METRIC=MARGIN`` or ``--superior METRIC=MARGIN``."""

    metric: str
    margin: float
    kind: GateKind

    @property
    def label(self) -> str:
        return f"{FLAG[self.kind]} {self.metric}={self.margin:g}"


@dataclass
class PairedResult:
    """A gate's outcome: the oriented difference (positive = run better), its interval and the verdict."""

    metric: str
    kind: GateKind
    margin: float
    n: int
    b: int  # queries only the run gets right (after orientation)
    c: int  # queries only the baseline gets right
    diff: float | None  # None only when errors left no shared query
    lo: float | None
    hi: float | None
    verdict: str
    needed_n: int | None
    ok: bool
    method: str = METHOD
    missing: list[str] = field(default_factory=list)  # "run: q1/rag (llm_error)": any fails the gate
    message: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["flag"] = FLAG[self.kind]
        return d

    @property
    def threshold(self) -> MarginSpec:
        """The gate as a JUnit test case names it (gate.write_junit reads threshold.label, ok, message)."""
        return MarginSpec(self.metric, self.margin, self.kind)


def _metric_form(metric: str) -> str | None:
    """The canonical name of a metric the paired gates cover (``rag.pass_rate`` -> ``rag.pass``), or None."""
    m = metric.strip()
    m = m.removesuffix("_rate") if m.endswith(".pass_rate") else m
    ok = (m.startswith("exec@") and is_metric_name(m)) or _PASS.match(m) or m == "retrieval_induced_failures"
    return m if ok else None


def parse_margins(specs: Iterable[str] | None, kind: GateKind) -> list[MarginSpec]:
    """``["rag.pass=0.05", ...]`` -> MarginSpecs; ConfigError (exit 2) for anything malformed."""
    out: list[MarginSpec] = []
    for spec in specs or []:
        metric, sep, raw = spec.partition("=")
        if not sep or not metric.strip() or not raw.strip():
            raise ConfigError(f"{FLAG[kind]} {spec!r}: expected METRIC=MARGIN, e.g. rag.pass=0.05")
        try:
            margin = float(raw)
        except ValueError as exc:
            raise ConfigError(f"{FLAG[kind]} {spec!r}: {raw.strip()!r} is not a number") from exc
        if not math.isfinite(margin) or not 0.0 < margin < 1.0:
            raise ConfigError(
                f"{FLAG[kind]} {spec!r}: the margin is a difference of rates, so it must lie in (0, 1), e.g. 0.05"
            )
        name = _metric_form(metric)
        if name is None:
            raise ConfigError(f"{FLAG[kind]} {spec!r}: unknown metric {metric.strip()!r}; use {_FORMS}")
        out.append(MarginSpec(name, margin, kind))
    return out


def metric_conditions(metric: str) -> tuple[str, ...]:
    """The generation conditions whose records a metric's outcomes come from (none for exec@k)."""
    if metric.endswith(".pass"):
        return (metric[: -len(".pass")],)
    return ("closed_book", "rag") if metric == "retrieval_induced_failures" else ()


def check_conditions(specs: Sequence[MarginSpec], conditions: Iterable[str], where: str = "this run") -> None:
    """Before any work: every condition a gate needs is evaluated in ``where``."""
    have = list(conditions)
    for s in specs:
        lacking = [c for c in metric_conditions(s.metric) if c not in have]
        if lacking:
            raise ConfigError(
                f"{s.label}: needs the {' and '.join(lacking)} condition in {where} (conditions: {', '.join(have)})"
            )


def valid_metrics(run: dict[str, dict[str, int]], baseline: dict[str, dict[str, int]]) -> list[str]:
    """The metrics both runs' outcomes have that the paired gates cover."""
    return [m for m in run if m in baseline and _metric_form(m) == m]


def oriented(metric: str, outcomes: dict[str, int]) -> dict[str, int]:
    """Outcomes with 1 = good: lower-is-better metrics are flipped."""
    return {q: 1 - v for q, v in outcomes.items()} if metric in LOWER_IS_BETTER else dict(outcomes)


def _wilson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * ALPHA, method="wilson")
    return float(ci.low), float(ci.high)


def paired_interval(a: int, b: int, c: int, d: int) -> tuple[float, float, float]:
    """Difference (b - c) / n of the paired 2x2 table and its Newcombe method-10 95% interval.

    ``a``: both right; ``b``: only the first (the run); ``c``: only the second (the baseline); ``d``: both
    wrong. The difference is first minus second."""
    n = a + b + c + d
    if n <= 0:
        raise ValueError("a paired interval needs at least one pair")
    p1, p2 = (a + b) / n, (a + c) / n
    diff = (b - c) / n
    l1, u1 = _wilson(a + b, n)
    l2, u2 = _wilson(a + c, n)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(denom) if denom else 0.0
    dl1, du1, dl2, du2 = p1 - l1, u1 - p1, p2 - l2, u2 - p2
    lo = diff - math.sqrt(max(dl1**2 - 2 * phi * dl1 * du2 + du2**2, 0.0))
    hi = diff + math.sqrt(max(dl2**2 - 2 * phi * dl2 * du1 + du1**2, 0.0))
    return diff, max(lo, -1.0), min(hi, 1.0)


def needed_queries(
    psi: float, diff: float, margin: float, *, kind: GateKind = "non_inferior", power: float = 0.8
) -> int | None:
    """Queries for the gate to pass with probability ``power`` if ``diff`` is the true difference and
    ``psi`` the discordance rate (Connor 1987, normal approximation, one-sided alpha 0.025); None when
    ``diff`` is on the wrong side of the margin (no number of queries makes the gate pass)."""
    from scipy.stats import norm

    effect = diff + margin if kind == "non_inferior" else diff - margin
    if effect <= 0:
        return None
    variance = psi - diff**2
    if variance <= 0:
        return 1
    z = float(norm.ppf(1 - ALPHA)) + float(norm.ppf(power))
    return math.ceil(z * z * variance / effect**2)


def _verdict(
    spec: MarginSpec, diff: float, lo: float, hi: float, n: int, psi: float
) -> tuple[str, int | None]:
    good, bad = _VERDICTS[spec.kind]
    bound = -spec.margin if spec.kind == "non_inferior" else spec.margin
    if lo > bound:
        return good, None
    if hi < bound:
        return bad, None
    needed = needed_queries(psi, diff, spec.margin, kind=spec.kind)
    if needed is None:
        looks = "the run looks worse" if spec.kind == "non_inferior" else "the run does not look better"
        side = "below -" if spec.kind == "non_inferior" else "not above +"
        return (
            f"inconclusive: {looks} (the difference is {side}{spec.margin:g}); more queries will not help",
            None,
        )
    needed = max(needed, n + 1)
    return f"inconclusive: about {needed} queries needed", needed


def paired_gate(
    spec: MarginSpec,
    run: dict[str, int],
    baseline: dict[str, int],
    *,
    allow_inconclusive: bool = False,
    missing: Sequence[str] = (),
) -> PairedResult:
    """The gate on the queries both maps share (query_id -> 0/1 or, with --samples, pass fraction; 1 = good).

    ``missing`` names records lost to errors: the result then fails whatever the verdict, because the
    interval was computed on fewer queries than the run planned."""
    shared = sorted(set(run) & set(baseline))
    if not shared and missing:
        message = (
            f"{spec.metric}: no shared query left: {len(missing)} record(s) are missing because of errors "
            f"({_named(missing)}), so {spec.label} cannot be checked; redo them with --resume"
        )
        return PairedResult(
            spec.metric, spec.kind, spec.margin, 0, 0, 0, None, None, None, "not checked", None, False,
            missing=list(missing), message=message,
        )  # fmt: skip
    if not shared:
        raise ConfigError(
            f"{spec.label}: the run and the baseline share no scored query for {spec.metric}; "
            "were they run on the same pool and --limit/--sample?"
        )
    pairs = [(run[q], baseline[q]) for q in shared]
    n, b, c = len(pairs), sum(x > y for x, y in pairs), sum(y > x for x, y in pairs)
    method, psi = METHOD, max(b + c, 1) / n
    if all(x in (0, 1) for pair in pairs for x in pair):
        a = sum(x == y == 1 for x, y in pairs)
        diff, lo, hi = paired_interval(a, b, c, n - a - b - c)
    else:  # pass fractions of repeated samples; psi = mean squared difference (b + c over n on 0/1)
        diff, lo, hi = paired_fraction_interval([x - y for x, y in pairs])
        method, psi = FRACTION_METHOD, max(sum((x - y) ** 2 for x, y in pairs) / n, 1 / n)
    verdict, needed = _verdict(spec, diff, lo, hi, n, psi)
    good = verdict == _VERDICTS[spec.kind][0]
    ok = (good or (allow_inconclusive and verdict.startswith("inconclusive"))) and not missing
    sign = "baseline - run: lower is better" if spec.metric in LOWER_IS_BETTER else "run - baseline"
    message = (
        f"{spec.metric}: difference {diff:+.3f} ({sign}), 95% CI [{lo:+.3f}, {hi:+.3f}], n = {n}, "
        f"discordant pairs {b + c} ({b} better in the run, {c} in the baseline); {spec.label}: {verdict}"
    )
    if missing:
        message += (
            f"; but {len(missing)} record(s) are missing because of errors ({_named(missing)}), so the gate cannot be "
            "checked on the whole run; redo them with --resume"
        )
    return PairedResult(
        spec.metric, spec.kind, spec.margin, n, b, c, diff, lo, hi, verdict, needed, ok, method=method,
        missing=list(missing), message=message,
    )  # fmt: skip


def _named(missing: Sequence[str]) -> str:
    return ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")


def missing_for(metric: str, records: Sequence[RunRecord], side: str) -> list[str]:
    """Records of the metric's conditions lost to ``llm_error``/``infra_error``, named for a message."""
    lost = [r for r in records if r.status in ERROR_STATUSES and r.condition in metric_conditions(metric)]
    return [f"{side}: {r.query_id}/{r.condition} ({r.status})" for r in lost]


def gate_runs(
    run: RunData, baseline: RunData, specs: Sequence[MarginSpec], *, allow_inconclusive: bool = False
) -> list[PairedResult]:
    """Every gate of ``specs`` on two loaded run directories, paired on the queries both scored (the
    outcomes are read as ``agentbench compare`` reads them). ConfigError for a metric not in both runs
    (naming the valid ones) or for runs whose shared query ids hold different queries."""
    from .compare import run_source

    ours, theirs = run_source(run), run_source(baseline)
    _same_queries(ours.queries, theirs.queries)
    valid = valid_metrics(ours.outcomes, theirs.outcomes)
    out = []
    for spec in specs:
        if spec.metric not in valid:
            raise ConfigError(
                f"{spec.label}: {spec.metric} is not measured in both runs; valid metrics: {', '.join(valid) or 'none'}"
            )
        missing = missing_for(spec.metric, run.records, "run") + missing_for(
            spec.metric, baseline.records, "baseline"
        )
        out.append(
            paired_gate(
                spec,
                oriented(spec.metric, ours.outcomes[spec.metric]),
                oriented(spec.metric, theirs.outcomes[spec.metric]),
                allow_inconclusive=allow_inconclusive,
                missing=missing,
            )
        )
    return out


def _same_queries(ours: dict[str, str], theirs: dict[str, str]) -> None:
    differ = [q for q in ours if q in theirs and ours[q] != theirs[q]]
    if differ:
        raise ConfigError(
            f"the run and the baseline have different queries under the same id ({differ[0]}, {len(differ)} in "
            "all): they were run on different pools and cannot be paired"
        )


@dataclass
class Plan:
    """How many queries a ``--non-inferior METRIC=MARGIN`` gate needs, and what the estimate rests on."""

    metric: str
    margin: float
    power: float
    diff: float  # the assumed true difference (run - baseline, oriented)
    psi: float  # the discordance rate used
    psi_source: str  # "observed" (baseline vs pilot) or "2p(1-p) upper bound" (one run)
    n: int  # the queries the estimate rests on
    rate: float  # the baseline's rate of the metric on them (oriented: 1 = good)
    discordant: int | None  # discordant pairs between baseline and pilot (None without a pilot)
    needed_n: int | None

    def to_dict(self) -> dict:
        return asdict(self)


def plan_queries(
    baseline: RunData,
    metric: str,
    margin: float,
    *,
    power: float = 0.8,
    pilot: RunData | None = None,
    diff: float = 0.0,
) -> Plan:
    """The sample size of a non-inferiority gate from the baseline's discordance rate: observed between
    ``baseline`` and ``pilot`` when a pilot run is given; otherwise 2p(1-p), the discordance of two runs
    whose outcomes are independent, which bounds it from above when the runs agree more than chance (two
    configurations of one system do: they solve the same easy queries)."""
    from .compare import run_source

    if not (math.isfinite(margin) and 0.0 < margin < 1.0):
        raise ConfigError(f"--margin {margin:g}: a difference of rates, so it must lie in (0, 1), e.g. 0.05")
    name = _metric_form(metric)
    if name is None:
        raise ConfigError(f"--metric {metric!r}: unknown metric; use {_FORMS}")
    spec = MarginSpec(name, margin, "non_inferior")
    if not (math.isfinite(power) and 0.0 < power < 1.0):
        raise ConfigError(f"--power {power:g}: must lie in (0, 1), e.g. 0.8")
    if not (math.isfinite(diff) and -1.0 < diff < 1.0):
        raise ConfigError(f"--difference {diff:g}: must lie in (-1, 1), e.g. 0")
    base = run_source(baseline)
    other = run_source(pilot) if pilot is not None else None
    valid = valid_metrics(base.outcomes, other.outcomes if other else base.outcomes)
    if spec.metric not in valid:
        raise ConfigError(
            f"--metric {spec.metric}: not measured in the run(s); valid metrics: {', '.join(valid) or 'none'}"
        )
    ours = oriented(spec.metric, base.outcomes[spec.metric])
    discordant = None
    if other is not None:
        _same_queries(base.queries, other.queries)
        theirs = oriented(spec.metric, other.outcomes[spec.metric])
        shared = sorted(set(ours) & set(theirs))
        if not shared:
            raise ConfigError(f"the baseline and the pilot share no scored query for {spec.metric}")
        discordant = sum(ours[q] != theirs[q] for q in shared)
        n, rate = len(shared), sum(ours[q] for q in shared) / len(shared)
        psi, source = max(discordant, 1) / n, "observed"
    else:
        if not ours:
            raise ConfigError(f"the baseline has no scored query for {spec.metric}")
        n, rate = len(ours), sum(ours.values()) / len(ours)
        psi, source = max(2 * rate * (1 - rate), 1 / n), "2p(1-p) upper bound"
    needed = needed_queries(psi, diff, spec.margin, power=power)
    return Plan(spec.metric, spec.margin, power, diff, psi, source, n, rate, discordant, needed)
