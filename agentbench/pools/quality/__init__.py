"""Checks of a pool's task data that need execution: spec examples and tasks that duplicate each other.

- :func:`example_asserts` (``examples``): every example a spec states as ``f(args) -> value`` (also ``==>``,
  ``=>``, ``➞``, ``==`` and ``=``, doctest ``>>> expr`` followed by its output, and ``Example: X -> Y`` for a
  function of known arity) as an assert, so running them against the canonical shows examples that
  contradict it.
- :func:`duplicate_pairs` (``duplicates``): pairs (A, B) where B's canonical passes every assert of A, i.e.
  A's tests cannot tell B's task from A's.
"""

from .duplicates import duplicate_pairs
from .examples import example_asserts
from .tasks import TaskView, task_views

__all__ = ["TaskView", "duplicate_pairs", "example_asserts", "task_views"]
