"""Static side-effect check: a function whose result depends on (or changes) the world outside its
arguments cannot be a task, because its asserts would not mean the same thing in the sandbox.

Read from the function's ``ast`` (and its helpers'): ``global`` statements and writes to module-level
objects (``global_state``); files, processes, the terminal and the network (``side_effects``); clocks,
random numbers and the environment (``nondeterministic``).
"""

from __future__ import annotations

import ast

from .discover import Module

__all__ = ["side_effect", "NONDETERMINISTIC", "IO_CALLS", "NETWORK"]

IO_BUILTINS = {"print", "input", "open", "exec", "eval", "breakpoint", "exit", "quit", "__import__"}
IO_CALLS = (
    "os.",
    "shutil.",
    "subprocess.",
    "tempfile.",
    "glob.",
    "pathlib.",
    "io.open",
    "sys.exit",
    "sys.stdout",
    "sys.stderr",
    "sys.stdin",
    "time.sleep",
    "webbrowser.",
    "ctypes.",
    "signal.",
    "atexit.",
    "sqlite3.",
    "multiprocessing.",
    "threading.Thread",
    "pickle.dump",
    "pickle.load",
    "marshal.load",
    "builtins.open",
    "builtins.print",
)
PURE_OS = (
    "os.path.join",
    "os.path.split",
    "os.path.splitext",
    "os.path.basename",
    "os.path.dirname",
    "os.path.normpath",
    "os.path.normcase",
    "os.path.commonprefix",
    "os.path.commonpath",
    "os.path.isabs",
    "os.path.sep",
    "os.sep",
    "os.linesep",
    "os.extsep",
    "os.altsep",
    "os.pathsep",
    "os.curdir",
    "os.pardir",
    "os.fspath",
    "os.fsencode",
    "os.fsdecode",
    "os.PathLike",
    "os.path.splitdrive",
    "pathlib.PurePath",
    "pathlib.PurePosixPath",
    "pathlib.PureWindowsPath",
    "io.StringIO",
    "io.BytesIO",
)
NETWORK = (
    "socket.",
    "urllib.request",
    "urllib2",
    "http.client",
    "http.server",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "ssl.",
    "requests.",
    "httpx.",
    "urllib3.",
    "asyncio.open_connection",
)
NONDETERMINISTIC = (
    "random.",
    "secrets.",
    "uuid.uuid1",
    "uuid.uuid4",
    "os.urandom",
    "os.environ",
    "os.getenv",
    "os.getpid",
    "time.time",
    "time.monotonic",
    "time.perf_counter",
    "time.process_time",
    "time.localtime",
    "time.gmtime",
    "time.ctime",
    "time.strftime",
    "datetime.datetime.now",
    "datetime.datetime.today",
    "datetime.datetime.utcnow",
    "datetime.date.today",
    "locale.",
)
SEEDED = ("random.Random", "random.SystemRandom")  # an explicit generator: deterministic when seeded
MUTATORS = {
    "append",
    "extend",
    "insert",
    "update",
    "pop",
    "popitem",
    "clear",
    "add",
    "remove",
    "discard",
    "setdefault",
    "appendleft",
    "extendleft",
    "popleft",
    "sort",
    "reverse",
    "__setitem__",
    "__delitem__",
    "write",
    "writelines",
}


def _local_names(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n is not fn:
            names.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    declared_global = {g for n in ast.walk(fn) if isinstance(n, ast.Global) for g in n.names}
    return names - declared_global


def _inner_imports(fn: ast.FunctionDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Import):
            for a in n.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(n, ast.ImportFrom) and not n.level:
            for a in n.names:
                out[a.asname or a.name] = f"{n.module}.{a.name}"
    return out


def _dotted(node: ast.expr) -> tuple[str, list[str]] | None:
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, attrs
    return None


def _qualified(
    module: Module, root: str, attrs: list[str], inner: dict[str, str], local: set[str]
) -> str | None:
    """``os.path.exists`` for ``exists`` bound by ``from os.path import exists``; None for locals."""
    if root in inner:
        return ".".join([inner[root], *attrs])
    if root in local:
        return None
    b = module.bindings.get(root)
    if b is not None and b.kind == "import":
        base = b.module or root
        if b.attr:
            base = f"{base}.{b.attr}"
        return ".".join([base, *attrs])
    if b is None and not attrs:
        return f"builtins.{root}"
    return None


def _classify(name: str) -> str | None:
    if name.startswith("builtins."):
        return "side_effects" if name.removeprefix("builtins.") in IO_BUILTINS else None
    if name.startswith(PURE_OS) or name.startswith(SEEDED):
        return None
    if name.startswith(NETWORK):
        return "side_effects"
    if name.startswith(NONDETERMINISTIC) or name in ("random.random", "time.time"):
        return "nondeterministic"
    if name.startswith(IO_CALLS):
        return "side_effects"
    return None


def side_effect(module: Module, fn: ast.FunctionDef) -> tuple[str, str] | None:
    """(reason, detail) when the function has an effect the sandbox cannot reproduce; None when pure."""
    local = _local_names(fn)
    inner = _inner_imports(fn)
    for n in ast.walk(fn):
        if isinstance(n, ast.Global):
            return "global_state", f"declares global {', '.join(n.names)}"
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, ast.AugAssign | ast.AnnAssign):
            targets = [n.target]
        elif isinstance(n, ast.Delete):
            targets = n.targets
        for t in targets:
            if isinstance(t, ast.Subscript | ast.Attribute):
                d = _dotted(t.value)
                if d and d[0] not in local and d[0] in module.bindings:
                    return "global_state", f"writes to module-level {d[0]}"
        if isinstance(n, ast.Call):
            d = _dotted(n.func)
            if d is None:
                continue
            root, attrs = d
            if attrs and attrs[-1] in MUTATORS and root not in local and root in module.bindings:
                b = module.bindings[root]
                if b.kind in ("assign", "compound") and len(attrs) == 1:
                    return "global_state", f"changes module-level {root} ({attrs[-1]})"
            qual = _qualified(module, root, attrs, inner, local)
            if qual is None:
                continue
            reason = _classify(qual)
            if reason:
                return reason, f"calls {qual.removeprefix('builtins.')}"
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            d = _dotted(n)
            if d and d[1]:
                qual = _qualified(module, d[0], d[1], inner, local)
                if qual and (qual.startswith("os.environ") or qual.startswith("sys.argv")):
                    return "nondeterministic", f"reads {qual}"
    return None
