"""`agentbench run`: end-to-end agent evaluation."""

from __future__ import annotations

import typer


def run() -> None:
    """Run the agent end to end (not implemented yet)."""
    raise typer.Exit(2)
