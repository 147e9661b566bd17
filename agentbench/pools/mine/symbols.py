"""The names a piece of mined code looks up outside itself, read from its symbol table (nothing runs)."""

from __future__ import annotations

import symtable


def free_names(source: str) -> set[str]:
    """Names a self-contained statement's code looks up outside itself (module globals or builtins), from
    the symbol table of its source (nothing is run): names its top level reads and the globals of every
    function or class inside it."""
    try:
        top = symtable.symtable(source, "<mined>", "exec")
    except (SyntaxError, ValueError):
        return set()
    names = {s.get_name() for s in top.get_symbols() if s.is_referenced()}

    def walk(table: symtable.SymbolTable) -> None:
        for child in table.get_children():
            for s in child.get_symbols():
                if s.is_global() and (s.is_referenced() or s.is_assigned()):
                    names.add(s.get_name())
            walk(child)

    walk(top)
    return names
