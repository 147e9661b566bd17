"""Where a distractor differs from its canonical, for pools whose metadata does not say."""

from __future__ import annotations

import difflib

__all__ = ["edit_between"]


def edit_between(canonical: str, mutant: str) -> tuple[int | None, str, str]:
    """``(line_number, line_before, line_after)`` of the edit that turns ``canonical`` into ``mutant``:
    the 1-based first changed canonical line and the changed lines on each side (``""`` for a pure
    deletion or insertion). Several separate edits are reported as one span covering all of them;
    identical code gives ``(None, "", "")``."""
    before, after = canonical.splitlines(), mutant.splitlines()
    changes = [
        op
        for op in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]
    if not changes:
        return None, "", ""
    i1, j1 = changes[0][1], changes[0][3]
    i2, j2 = changes[-1][2], changes[-1][4]
    return i1 + 1, "\n".join(before[i1:i2]), "\n".join(after[j1:j2])
