"""`agentbench workers`: the LiteLLM worker servers kept alive between runs (``AGENTBENCH_KEEP_WORKERS``)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["workers"]


def workers(
    stop: Annotated[
        bool, typer.Option("--stop", help="Stop them now (runs using their workers finish undisturbed).")
    ] = False,
) -> None:
    """List this user's kept LiteLLM worker servers, or stop them. Workers are kept when
    AGENTBENCH_KEEP_WORKERS=<idle seconds> is set (docs/scaling-api.md)."""
    from ..llm.kept import KEEP_ENV, list_servers, stop_server

    servers = list_servers()
    if not servers:
        typer.echo(f"no kept LiteLLM workers (set {KEEP_ENV}=<idle seconds> to keep them between runs)")
        return
    for server in servers:
        if server.pid is None:
            typer.echo(f"{server.socket}: not answering (a server that was killed)")
        elif stop:
            done = stop_server(server.socket)
            typer.echo(f"pid {server.pid}: {'stopped' if done else 'did not answer the stop'}")
        else:
            typer.echo(
                f"pid {server.pid}: {server.pools} run(s) connected, exits after {server.idle:g} s idle"
                f" ({server.socket})"
            )
