"""Single-edit mutation operators (the six ExecRetrieval bug types).

Sites are found with ``ast`` but every edit is applied to the original source text, so a mutant is
byte-identical to its canonical outside the one edited line (or the one removed guard statement).
Re-formatting with ``ast.unparse`` would let a retriever tell canonicals from mutants by layout.

The package: :mod:`.source` (the source text and edits of it), :mod:`.sites` (where each operator can
edit), :mod:`.crude` (edits that leave something nobody writes), :mod:`.top_up` (more edits, tried only
for tasks the six leave short) and :mod:`.mutants` (the mutants).
"""

from .crude import implausible_counts
from .mutants import CRUDE_REASONS, OPERATORS, Mutant, find_mutants

__all__ = ["Mutant", "find_mutants", "OPERATORS", "CRUDE_REASONS", "implausible_counts"]
