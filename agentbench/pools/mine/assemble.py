"""Assembling a task from a function and its kept asserts.

- query: the docstring's first sentence, or the function's name split into words when it has none;
- spec: the signature and the docstring, plus one sentence naming what the asserts check that the
  docstring does not state (a ``None`` result, an exception, a tuple, a label), so that every task is
  solvable from its text (``pool validate``'s spec check);
- code: the function with what it needs from its module (:mod:`.closure`);
- tests: the standalone asserts; test_setup: the imports and helpers they use.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from ..sources import SourceTask
from ..spec import unstated_conventions
from .discover import Function
from .scope import SetupItem

__all__ = ["query_of", "spec_of", "signature_of", "make_task", "name_words"]

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_RAISES = re.compile(r"^_raises\(([^,]+),")


def name_words(qualname: str) -> str:
    """``chunked_even`` -> "chunked even"; ``camelCase`` -> "camel case"; ``Cls.method`` -> "cls method"."""
    words: list[str] = []
    for part in qualname.split("."):
        part = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", part)
        words += [w.lower() for w in re.split(r"[_\s]+", part) if w]
    return " ".join(words)


def _clean(text: str) -> str:
    text = _ROLE.sub(lambda m: m.group(1).split(".")[-1], text)
    text = _LITERAL.sub(r"\1", text)
    return " ".join(text.split())


def query_of(fn: Function) -> str:
    doc = fn.docstring
    if doc:
        paragraph: list[str] = []
        for line in doc.strip().splitlines():
            if not line.strip():
                if paragraph:
                    break
                continue
            if line.strip().startswith(">>>"):
                break
            paragraph.append(line.strip())
        text = _clean(" ".join(paragraph))
        if text:
            m = re.search(r"(?<=[.!?])\s+(?=[A-Z(`\"'])", text)
            sentence = text[: m.start()] if m else text
            if len(sentence) > 300:
                sentence = sentence[:300].rsplit(" ", 1)[0]
            return sentence
    return name_words(fn.qualname)


def signature_of(fn: Function) -> str:
    args = fn.node.args
    if fn.method_kind == "classmethod":
        args = ast.arguments(
            posonlyargs=args.posonlyargs[1:] if args.posonlyargs else [],
            args=args.args[1:] if not args.posonlyargs else args.args,
            vararg=args.vararg,
            kwonlyargs=args.kwonlyargs,
            kw_defaults=args.kw_defaults,
            kwarg=args.kwarg,
            defaults=args.defaults,
        )
    text = f"def {fn.name}({ast.unparse(args)})"
    if fn.node.returns is not None:
        text += f" -> {ast.unparse(fn.node.returns)}"
    return text


def _conventions(tests: Sequence[str], text: str) -> list[str]:
    """What the asserts check that ``text`` does not state, as short phrases."""
    phrases: list[str] = []
    for gap in unstated_conventions(tests, text):
        lit = gap.literal
        if lit == "None":
            phrase = "returns None for some inputs"
        elif lit in ("a tuple", "a dict", "a set"):
            phrase = f"returns {lit}"
        elif re.fullmatch(r"-\d", lit):
            phrase = f"returns {lit} for some inputs"
        elif lit[:1] in "'\"":
            phrase = f"results such as {lit}"
        else:
            phrase = f"raises {lit} for some inputs"
        if phrase not in phrases:
            phrases.append(phrase)
    for test in tests:
        m = _RAISES.match(test.removeprefix("assert "))
        if m:
            exc = m.group(1).strip()
            if exc.casefold() not in text.casefold() and f"raises {exc} for some inputs" not in phrases:
                phrases.append(f"raises {exc} for some inputs")
    return phrases


def spec_of(fn: Function, tests: Sequence[str]) -> str:
    doc = fn.docstring
    body = doc.strip() if doc else name_words(fn.qualname).capitalize() + "."
    spec = f"{signature_of(fn)}\n\n{body}"
    extra = _conventions(tests, spec)
    if extra:
        spec += "\n\nThe tests also check: " + "; ".join(extra) + "."
    return spec


def make_task(fn: Function, code: str, tests: list[str], setup: Sequence[SetupItem]) -> SourceTask:
    items = sorted(set(setup))
    imports = "\n".join(i.text for i in items if i.key[0] == 0)
    defs = "\n\n".join(i.text for i in items if i.key[0] != 0)
    test_setup = "\n\n".join(p for p in (imports, defs) if p)
    return SourceTask(
        id=fn.key,
        domain=fn.module.name,
        query=query_of(fn),
        spec=spec_of(fn, tests),
        code=code,
        tests=tests,
        test_setup=test_setup or None,
        location=f"{fn.module.rel}:{fn.node.lineno}",
    )
