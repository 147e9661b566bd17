"""The child process that runs a local GGUF model: ``python -m agentbench.llm.local_worker SPEC``.

llama.cpp is native code: a build for the wrong CPU dies of SIGILL, a bug of SIGSEGV, a big context of
the OOM killer. In its own process such a death cannot take the run with it; the parent
(:class:`agentbench.llm.local.LocalModelProcess`) sees the pipe close, reads the exit signal and
reports it. ``SPEC`` is a JSON object: ``model_path``, ``n_ctx``, ``n_threads`` and ``parent_pid``.

The worker never outlives its parent by more than :data:`PARENT_POLL_S`: a watchdog thread, started
before llama.cpp is imported, ends the process once its parent process is gone (SIGKILL, OOM kill,
crash), whatever the main thread is doing (loading the weights, generating: llama-cpp-python calls
llama.cpp through ctypes, which releases the GIL). End of input only reaches a worker between requests.
``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that started the worker ends, and the
worker is started from whichever thread first asks for the model, often a short-lived one
(``LocalLLM.acompletion``'s).

Every request is computed from an empty KV cache (``llama.reset()`` first), so a reply depends only
on the request, never on the requests before it. llama-cpp-python otherwise reuses the longest
common token prefix with the previous request (the shared system prompt) and evaluates only the rest;
that splits the prompt into different batches, which changes the floating-point results enough to
change greedy output (measured: the same prompt gave 244 tokens fresh and hit max_tokens=1024 after
another prompt). ``n_batch``/``n_ubatch`` are fixed for the same reason. The price is evaluating the
shared system prompt again each time: about 1.2 s more per request for the 0.5B model on two busy cores
(eight agent prompts, first token only: 25.6 s instead of 16.2 s). The thread count does not change the
output (0.5B model, x86-64 AVX2 build: 1 to 4 threads, and under CPU load, gave identical text).

Protocol: one JSON object per line. The worker first answers ``{"ok": true}`` (or an error), then
for each request ``{"messages": [...], "params": {...}}`` (``params`` may hold ``grammar``, a GBNF text the
reply is sampled under; see :mod:`agentbench.agent.grammar`) (or ``{"op": "reset"}``) one reply
``{"ok": true, "result": <chat completion>}`` or
``{"ok": false, "error": <exception class>, "message": ...}``. The worker exits on end of input.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

PARENT_POLL_S = 0.1
"""How often the watchdog checks that the parent is alive (the worker exits within about this long)."""
N_BATCH = 512
"""Prompt tokens per llama.cpp decode (and per micro-batch): fixed, since the split changes results."""


def parent_gone(parent_pid: int, first_ppid: int) -> bool:
    """Whether the process that started this worker has ended.

    An orphan is re-parented (to init or a subreaper), so ``os.getppid()`` moving away from
    ``first_ppid`` means the parent died. A parent that died before this process first looked (or sits
    behind a launcher that forked us) is caught by ``parent_pid`` itself being gone or a zombie.
    """
    if os.getppid() != first_ppid:
        return True
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    try:
        state = Path(f"/proc/{parent_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # no procfs: the pid exists, take it as alive
        return False
    return state in ("Z", "X")


def watch_parent(parent_pid: int, interval: float = PARENT_POLL_S) -> threading.Thread:
    """Start a daemon thread that ends this process at once when its parent ``parent_pid`` is gone."""
    first_ppid = os.getppid()

    def watch() -> None:
        while not parent_gone(parent_pid, first_ppid):
            time.sleep(interval)
        os._exit(0)  # nobody is left to answer; skip interpreter teardown mid-generation

    thread = threading.Thread(target=watch, name="agentbench-parent-watchdog", daemon=True)
    thread.start()
    return thread


def _reply(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _error(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": type(exc).__name__, "message": str(exc)}


_grammars: dict[str, Any] = {}


def _grammar(gbnf: str) -> Any:
    """The ``LlamaGrammar`` of a GBNF text (a request parameter travels as text; the few distinct
    grammars of a run are kept)."""
    if gbnf not in _grammars:
        from llama_cpp import LlamaGrammar

        if len(_grammars) >= 64:
            _grammars.clear()
        _grammars[gbnf] = LlamaGrammar.from_string(gbnf, verbose=False)
    return _grammars[gbnf]


class GrammarFirst:
    """Greedy decoding under a GBNF grammar that checks the model's own choice first.

    llama.cpp's grammar sampler tests every token of the vocabulary against the grammar at each step
    (152k tokens for Qwen2.5: tens of milliseconds on a busy core, as long as the model's own step). Under
    greedy decoding only the best token matters: if the grammar allows the model's argmax, that is the
    token the constrained sampler would pick too, and one check suffices; only when it is disallowed is the
    whole vocabulary masked. The reply is the one ``grammar=`` would give, token for token (llama.cpp's
    own samplers do the same, "grammar after sampling"). Used as a ``logits_processor``: it sees the
    tokens generated so far and advances the grammar with each before looking at the next step."""

    def __init__(self, llama: Any, gbnf: str) -> None:
        import llama_cpp
        import numpy as np

        self._c, self._np = llama_cpp, np
        self.sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, gbnf.encode(), b"root")
        if not self.sampler:
            raise ValueError("llama.cpp cannot parse the grammar")
        self.seen: int | None = None
        self.one = (llama_cpp.llama_token_data * 1)()
        self.full = np.zeros(
            llama.n_vocab(),
            dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True),
        )
        self.full["id"] = np.arange(len(self.full), dtype=np.intc)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        c, np = self._c, self._np
        if self.seen is None:
            self.seen = len(input_ids)  # the prompt: nothing generated yet
        for token in input_ids[self.seen :]:  # what was generated since the last step
            c.llama_sampler_accept(self.sampler, int(token))
        self.seen = len(input_ids)
        best = int(np.argmax(scores))
        self.one[0].id, self.one[0].logit, self.one[0].p = best, float(scores[best]), 0.0
        c.llama_sampler_apply(self.sampler, ctypes.byref(c.llama_token_data_array(self.one, 1, -1, False)))
        if self.one[0].logit != float("-inf"):
            return scores
        self.full["logit"] = scores
        candidates = c.llama_token_data_array(
            self.full.ctypes.data_as(c.llama_token_data_p), len(self.full), -1, False
        )
        c.llama_sampler_apply(self.sampler, ctypes.byref(candidates))
        return self.full["logit"].copy()

    def close(self) -> None:
        if self.sampler:
            self._c.llama_sampler_free(self.sampler)
            self.sampler = None


def serve(spec: dict[str, Any], requests: IO[str], out: IO[str]) -> int:
    try:
        from llama_cpp import Llama

        llama = Llama(
            model_path=spec["model_path"],
            n_ctx=int(spec["n_ctx"]),
            n_threads=int(spec["n_threads"]),
            n_threads_batch=int(spec["n_threads"]),
            n_batch=N_BATCH,
            n_ubatch=N_BATCH,
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
            llama.reset()  # no prompt-prefix reuse: see the module docstring
            params = dict(request["params"])
            gbnf = params.pop("grammar", None)
            checker = None
            if gbnf and float(params.get("temperature") or 0.0) == 0.0:
                checker = GrammarFirst(llama, gbnf)  # greedy: the same reply, at a fraction of the cost
                params["logits_processor"] = [checker]
            elif gbnf:
                params["grammar"] = _grammar(gbnf)
            try:
                result = llama.create_chat_completion(messages=request["messages"], **params)
            finally:
                if checker is not None:
                    checker.close()
        except Exception as exc:
            _reply(out, _error(exc))
            continue
        _reply(out, {"ok": True, "result": result})
    llama.close()
    return 0


def main() -> int:
    spec = json.loads(sys.argv[1])
    watch_parent(int(spec.get("parent_pid") or os.getppid()))
    # Ctrl-C reaches the whole process group: the parent handles it and closes our input, so the
    # worker must not die of it first (that would read as a crash of the model)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the protocol keeps the real stdout; anything native code prints goes to stderr instead
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(spec, sys.stdin, out)


if __name__ == "__main__":
    raise SystemExit(main())
