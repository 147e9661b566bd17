"""`agentbench retrieve`: retrieval-only scoring (exec@k and diagnostics)."""

from __future__ import annotations

import typer


def retrieve() -> None:
    """Score retrieval on a pool (not implemented yet)."""
    raise typer.Exit(2)
