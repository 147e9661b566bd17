"""The canonical's source as bytes, and single edits of it (``ast`` positions are UTF-8 byte offsets)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["Edit", "Site", "Source"]


@dataclass(frozen=True)
class Edit:
    start: int  # byte offsets into the UTF-8 source
    end: int
    text: str


# (bug type, edit, description) or, for an edit that is not a plausible near-miss, plus why (Mutant.crude)
Site = tuple[str, Edit, str] | tuple[str, Edit, str, str | None]


class Source:
    """UTF-8 view of the source; ``ast`` column offsets are byte offsets."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.data = code.encode()
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        return self.line_starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def line(self, lineno: int) -> str:
        return self.data[self.line_starts[lineno - 1] : self.line_starts[lineno]].decode().rstrip("\r\n")

    def apply(self, edit: Edit) -> str:
        return (self.data[: edit.start] + edit.text.encode() + self.data[edit.end :]).decode()
