"""Tests that separate wrong solutions: new asserts derived from a task's own asserts (EvalPlus-style).

A pool's asserts are often too few to tell a canonical from a near-miss: ``x >= t`` and ``x > t`` agree
when no input holds an element equal to ``t``. For each task this package

1. reads the asserts of the form ``assert <expr with f(literals)> == <expected>`` (also ``assert f(..)``,
   ``assert not f(..)``, ``f(..) is True`` and ``abs(f(..) - v) < tol``) and derives new inputs from their
   literal arguments: type-aware changes of ints, floats, strings, lists, tuples and dicts (boundary values,
   sign flips, empty and one-element values, shuffles, growth, whitespace and non-ASCII characters), drawn
   from a generator seeded with the pool seed and the task's id;
2. runs the canonical on them in the sandbox, three times in one process and once more in another, each
   call under a CPU guard, and takes its output as the expected value, dropping (and counting) inputs where
   it raises, runs out of time, returns a value ``repr`` cannot round-trip, or is nondeterministic;
3. runs every single-edit mutant (:func:`~agentbench.pools.mutate.find_mutants`) that passes all original
   asserts on the new asserts; a mutant that fails one is shown non-equivalent, and a greedy set cover
   keeps a few new asserts that kill them all.

The kept asserts go to the query's ``augmented_tests`` field, never into ``test_suite``: a run can score on
the original tests alone (``agentbench run --tests original``), and readers of the release format that do
not know the field ignore it. Every decision depends only on the pool, the seed and the verdicts, so the
same pool and seed give byte-identical output.

The package in the order of these steps: :mod:`.seeds` (1, the asserts read), :mod:`.inputs` (1, the new
inputs), :mod:`.probes` (2), :mod:`.mutants` (3), :mod:`.report` (what was found) and :mod:`.driver`
(the rounds of sandbox jobs for a whole pool).
"""

from .driver import DEFAULT_MAX_ADDED, augment_pool
from .inputs import generate_inputs
from .report import AUGMENT_REPORT, DEFAULT_INPUTS, AugmentReport, TaskAugment
from .seeds import Seed, parse_seeds

__all__ = [
    "AugmentReport",
    "TaskAugment",
    "Seed",
    "augment_pool",
    "generate_inputs",
    "parse_seeds",
    "DEFAULT_INPUTS",
    "DEFAULT_MAX_ADDED",
    "AUGMENT_REPORT",
]
