"""The mutants of a canonical: every site's edit applied, checked, deduplicated and flagged when crude."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..models import BUG_TYPES
from .crude import count_names, implausible_counts
from .sites import find_sites
from .source import Source
from .top_up import find_top_up_sites

__all__ = ["Mutant", "find_mutants", "OPERATORS", "CRUDE_REASONS"]

OPERATORS = BUG_TYPES  # the mutation operators are the six bug types (one definition, in models)

CRUDE_REASONS = ("literal_operand", "not_a_short_guard", "no_op", "impossible_comparison")


@dataclass(frozen=True)
class Mutant:
    """One single-edit mutant of a canonical, with the line it changes."""

    bug_type: str
    code: str
    line_number: int  # 1-based line of the edit in the canonical
    line_before: str
    line_after: str  # "" when the edit removed the line(s)
    description: str
    crude: str | None = None
    """Why the edit is not a plausible near-miss (the builder rejects it by default), one of
    :data:`CRUDE_REASONS`: ``literal_operand`` (an operand swapped with a literal, ``1 >> n``),
    ``not_a_short_guard`` (the removed ``if`` does more than return or raise a simple value), ``no_op``
    (the edit leaves an operation nobody writes: ``x - 0``, ``-0``, ``n * 1``, ``x ** 1``, ``i += 0``) or
    ``impossible_comparison`` (a length, count or ``abs()`` compared with a negative constant, or below
    zero: ``len(x) == -1``, ``len(x) < 0``; such a guard never fires, a giveaway no person writes)."""


def find_mutants(code: str, *, top_up: bool = False) -> list[Mutant]:
    """All syntactically valid single-edit mutants of ``code``, deduplicated, in source order: of the
    six bug types, or with ``top_up`` of the top-up operators (:mod:`.top_up`)."""
    tree = ast.parse(code)
    src = Source(code)
    canonical_dump = ast.dump(tree)
    counts = count_names(tree)
    implausible = implausible_counts(tree, counts)
    seen: set[str] = {code}
    mutants: list[Mutant] = []
    sites = find_top_up_sites(tree, src) if top_up else find_sites(tree, src)
    for bug_type, edit, description, *flag in sites:
        first_line = src.line_of(edit.start)
        last_line = src.line_of(max(edit.start, edit.end - 1))
        if bug_type != "remove_edge_case_check" and first_line != last_line:
            continue  # a single-line edit must stay on one line
        new_code = src.apply(edit)
        if new_code in seen:
            continue
        try:
            new_tree = ast.parse(new_code)
        except SyntaxError:
            continue
        if ast.dump(new_tree) == canonical_dump:
            continue
        seen.add(new_code)
        before = "\n".join(src.line(n) for n in range(first_line, last_line + 1))
        after = "" if bug_type == "remove_edge_case_check" else new_code.splitlines()[first_line - 1]
        crude = flag[0] if flag else None
        if crude is None:
            made = implausible_counts(new_tree, counts) - implausible
            crude = next((reason for reason in CRUDE_REASONS if made[reason]), None)
        mutants.append(Mutant(bug_type, new_code, first_line, before, after, description, crude))
    mutants.sort(key=lambda m: (m.line_number, m.bug_type, m.code))
    return mutants
