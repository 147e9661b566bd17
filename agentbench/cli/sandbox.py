"""`agentbench sandbox ...` commands: build the image, check the setup, run one snippet."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ConfigError, SandboxError
from ..execution.base import DEFAULT_TIMEOUT, SANDBOX_KINDS, Job

app = typer.Typer(help="Build, check and use the execution sandbox.", no_args_is_help=True)


@app.command("build")
def build(
    offline: Annotated[
        bool, typer.Option("--offline", help="Debootstrap the base from apt; no registry.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the image is present.")] = False,
) -> None:
    """Build the sandbox image (agentbench-sandbox:<hash>) unless it is already present."""
    from ..execution.image import build_image

    typer.echo(build_image(offline=offline, force=force))


@app.command("check")
def check() -> None:
    """Report whether the Docker engine is reachable, the image present, and a trial run works."""
    from ..execution.container import DockerExecutor
    from ..execution.engine import connect, engine_version, image_present, image_tag
    from ..execution.process import ProcessExecutor

    trial = Job("def add(a, b):\n    return a + b\n", ("assert add(1, 2) == 3", "assert add(1, 2) == 4"), 10)
    with ProcessExecutor(workers=1) as proc:
        res = proc.run([trial])[0]
        ok = res.results == ["pass", "FAIL"]
        typer.echo(f"process executor: {'ok' if ok else 'FAILED ' + str(res.results)} ({proc.describe()})")
    try:
        client = connect(timeout=10)
    except SandboxError:
        typer.echo("docker engine:    NOT reachable")
        raise
    typer.echo(f"docker engine:    ok (version {engine_version(client).get('Version', '?')})")
    tag = image_tag()
    if not image_present(client, tag):
        client.close()
        typer.echo(f"sandbox image:    MISSING {tag}")
        raise SandboxError(f"sandbox image {tag} is missing: run `agentbench sandbox build --offline`")
    typer.echo(f"sandbox image:    ok ({tag})")
    start = time.monotonic()
    with DockerExecutor(workers=1, client=client) as docker_exec:
        res = docker_exec.run([trial])[0]
    client.close()
    if res.results != ["pass", "FAIL"]:
        raise SandboxError(
            f"the Docker trial run gave {res.results} instead of ['pass', 'FAIL']: {res.infra_error}"
        )
    typer.echo(f"docker trial run: ok ({time.monotonic() - start:.1f} s including container start)")


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the {what} file {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}): save it as UTF-8"
        ) from exc


@app.command("exec")
def exec_(
    code: Annotated[Path, typer.Option("--code", help="Python file with the snippet.")],
    tests: Annotated[
        Path, typer.Option("--tests", help="Asserts, one per line (blank and # lines skipped).")
    ],
    sandbox: Annotated[str, typer.Option("--sandbox", help=f"One of {', '.join(SANDBOX_KINDS)}.")] = "auto",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds for the whole job.")] = DEFAULT_TIMEOUT,
    as_json: Annotated[bool, typer.Option("--json", help="Print {passed, results, stdout, stderr}.")] = False,
) -> None:
    """Run one snippet against a file of asserts and print the per-assert verdicts (exit 1 if not passed)."""
    from ..execution.select import make_executor

    asserts = [
        ln for ln in _read(tests, "tests").splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not asserts:
        raise ConfigError(f"{tests} contains no asserts (one per line)")
    if timeout <= 0:
        raise ConfigError("--timeout must be positive")
    job = Job(_read(code, "code"), tuple(asserts), timeout)
    with make_executor(sandbox, workers=1) as executor:
        result = executor.run([job])[0]
    if as_json:
        typer.echo(json.dumps(result.to_json()))
    else:
        for verdict, line in zip(result.results, asserts, strict=True):
            typer.echo(f"{verdict:<8} {line}")
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                typer.echo(f"--- {name}\n{text.rstrip()}")
        if result.infra_error:
            typer.echo(f"infrastructure error: {result.infra_error}")
        typer.echo("PASSED" if result.passed else "NOT PASSED")
    if not result.passed:
        raise typer.Exit(1)
