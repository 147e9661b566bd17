"""The visible/held-out split of a query's asserts (``--visible-tests``).

Why here: the split is a property of the pool's queries, used by every stage that shows an agent some of
the tests and scores it on the others: the rerank stage (rerankers see only the visible asserts) and the
tool-using conditions (``run_tests`` runs the visible ones). Each query's asserts are split
deterministically by seed and query id, and at least one assert is always held out.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from .models import Query

__all__ = ["DEFAULT_VISIBLE", "VisibleTests", "TestSplit", "split_tests", "HeldOutSplit"]

DEFAULT_VISIBLE = "0.5"
"""``--visible-tests``'s default: half of each query's asserts are visible (rounded down, at least one)."""


@dataclass(frozen=True)
class VisibleTests:
    """How many asserts per query are visible: a count (``3``) or a fraction in (0, 1) (``0.5``)."""

    count: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, spec: str | int | float | VisibleTests) -> VisibleTests:
        if isinstance(spec, VisibleTests):
            return spec
        text = str(spec).strip()
        try:
            if text.isdigit():
                return cls(count=int(text))
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 < value < 1:
            raise ConfigError(
                f"--visible-tests must be a count (0, 1, 2, ...) or a fraction between 0 and 1, not {text!r}"
            )
        return cls(fraction=value)

    def n_visible(self, n_tests: int) -> int:
        """Visible asserts out of ``n_tests``: never all of them (one at least stays held out); a fraction
        rounds down but gives at least one visible assert when there are two or more."""
        if n_tests <= 1:
            return 0
        wanted = self.count if self.count is not None else max(1, math.floor(self.fraction * n_tests))
        return min(wanted, n_tests - 1)

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{self.fraction:g}"


@dataclass(frozen=True)
class TestSplit:
    """One query's asserts, split; ``visible_idx`` are positions in the original suite."""

    __test__ = False  # not a pytest class

    visible: tuple[str, ...]
    held_out: tuple[str, ...]
    visible_idx: tuple[int, ...]


def split_tests(tests: Sequence[str], visible: VisibleTests, seed: int, key: str) -> TestSplit:
    """Deterministic split of ``tests`` by ``seed`` and ``key`` (the query id); both parts keep suite order."""
    n = len(tests)
    rng = random.Random(f"{seed}:{key}:visible-tests")
    chosen = tuple(sorted(rng.sample(range(n), visible.n_visible(n))))
    picked = set(chosen)
    return TestSplit(
        visible=tuple(tests[i] for i in chosen),
        held_out=tuple(t for i, t in enumerate(tests) if i not in picked),
        visible_idx=chosen,
    )


@dataclass(frozen=True)
class HeldOutSplit:
    """The split of a run or a reranking: what an agent may see (visible asserts, in ``run_tests`` or a
    reranker's input) and what every condition is scored on (held-out ones)."""

    visible: VisibleTests
    seed: int = 0

    def split(self, query: Query) -> TestSplit:
        return split_tests(query.test_suite, self.visible, self.seed, query.query_id)
