"""The child process that runs a local GGUF model: ``python -m agentbench.agent.local_worker SPEC``.

llama.cpp is native code: a build for the wrong CPU dies of SIGILL, a bug of SIGSEGV, a big context of
the OOM killer. In its own process such a death cannot take the run with it; the parent
(:class:`agentbench.agent.local.LocalModelProcess`) sees the pipe close, reads the exit signal and
reports it. ``SPEC`` is a JSON object: ``model_path``, ``n_ctx``, ``n_threads``.

Protocol: one JSON object per line. The worker first answers ``{"ok": true}`` (or an error), then
for each request ``{"messages": [...], "params": {...}}`` (or ``{"op": "reset"}``) one reply
``{"ok": true, "result": <chat completion>}`` or
``{"ok": false, "error": <exception class>, "message": ...}``. The worker exits on end of input.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import IO, Any


def _reply(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _error(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": type(exc).__name__, "message": str(exc)}


def serve(spec: dict[str, Any], requests: IO[str], out: IO[str]) -> int:
    try:
        from llama_cpp import Llama

        llama = Llama(
            model_path=spec["model_path"],
            n_ctx=int(spec["n_ctx"]),
            n_threads=int(spec["n_threads"]),
            n_threads_batch=int(spec["n_threads"]),
            seed=0,
            verbose=False,
        )
    except Exception as exc:  # reported to the parent, which raises it there
        _reply(out, _error(exc))
        return 1
    _reply(out, {"ok": True})
    for line in requests:
        request = json.loads(line)
        if request.get("op") == "reset":
            llama.reset()
            _reply(out, {"ok": True})
            continue
        try:
            result = llama.create_chat_completion(messages=request["messages"], **request["params"])
        except Exception as exc:
            _reply(out, _error(exc))
            continue
        _reply(out, {"ok": True, "result": result})
    llama.close()
    return 0


def main() -> int:
    # Ctrl-C reaches the whole process group: the parent handles it and closes our input, so the
    # worker must not die of it first (that would read as a crash of the model)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the protocol keeps the real stdout; anything native code prints goes to stderr instead
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(json.loads(sys.argv[1]), sys.stdin, out)


if __name__ == "__main__":
    raise SystemExit(main())
