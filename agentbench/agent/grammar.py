"""The grammar a ``local/`` model's replies are decoded under in the tool conditions.

A small model asked for ``<tool_call>{...}</tool_call>`` in prose writes calls to the task's own
function, drops arguments and mixes prose with JSON (the README's 1.5B run: 29% valid calls). llama.cpp
can sample under a GBNF grammar, which makes such a reply impossible: every reply is exactly one of

- one tool call, in the text protocol's layout, naming an offered tool, with the arguments of that tool's
  JSON schema (required ones present, no others, each of its type; a ``code`` argument is Python source
  that starts with at most :data:`MAX_IMPORT_LINES` imports and then ``def <function_name>(``)::

      <tool_call>
      {"name": "run_tests", "arguments": {"code": "def f(x):\\n    return x + 1\\n"}}
      </tool_call>

- a final answer: one python code block defining the function, and nothing else.

The layout is fixed (``json.dumps`` spacing, properties in schema order), so the grammar is unambiguous
and cheap to apply. Each grammar comes with a Python regular expression built from the same pieces,
which admits the same language: the harness checks its grammars against it, and tests check
adversarial replies with it. A schema using something the builder cannot express (``$ref``, patterns,
unbounded numeric ranges ...) raises :class:`GrammarError` (a ConfigError) when the agent is built,
never mid-run.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["GrammarError", "ReplyGrammar", "check_schemas", "reply_grammar"]

CODE_PROPERTIES = ("code",)
"""String arguments that hold the task's function (their grammar requires ``def <function_name>(``)."""
_ANNOTATIONS = {"description", "default", "title", "examples", "$comment"}
MAX_IMPORT_LINES = 12
"""Import lines allowed before ``def <function_name>(``. Unbounded, greedy decoding can loop on them until
the token limit (the 1.5B model wrote ``from typing import *`` lines for 3,000 tokens in 3 of 57 core tasks,
ending with no function); bounded, the grammar then forces the ``def``."""
_MAX_ENUMERATED = 256
"""An integer range with ``minimum`` and ``maximum`` is spelled out when at most this wide."""


class GrammarError(ConfigError):
    """A tool schema that cannot be turned into a decoding grammar."""


@dataclass(frozen=True)
class _Piece:
    """One construct in both notations: a GBNF expression and the equivalent Python regex."""

    gbnf: str
    regex: str


def _lit(text: str) -> _Piece:
    return _Piece(json.dumps(text, ensure_ascii=False), re.escape(text))


def _seq(*pieces: _Piece) -> _Piece:
    return _Piece(" ".join(p.gbnf for p in pieces), "".join(p.regex for p in pieces))


def _alt(*pieces: _Piece) -> _Piece:
    return _Piece(
        "(" + " | ".join(p.gbnf for p in pieces) + ")", "(?:" + "|".join(p.regex for p in pieces) + ")"
    )


def _opt(piece: _Piece) -> _Piece:
    return _Piece(f"({piece.gbnf})?", f"(?:{piece.regex})?")


def _star(piece: _Piece) -> _Piece:
    return _Piece(f"({piece.gbnf})*", f"(?:{piece.regex})*")


def _upto(piece: _Piece, n: int) -> _Piece:
    return _Piece(f"({piece.gbnf}){{0,{n}}}", f"(?:{piece.regex}){{0,{n}}}")


_HEX = _Piece("[0-9a-fA-F]", "[0-9a-fA-F]")
_ESC_U = _seq(_lit("\\u"), _HEX, _HEX, _HEX, _HEX)
# a character of a JSON string: anything but a quote, a backslash or a control character, or an escape
_JCHAR = _alt(
    _Piece('[^"\\\\\\x00-\\x1F]', '[^"\\\\\\x00-\\x1f]'),
    _Piece('"\\\\" ["\\\\/bfnrt]', '\\\\["\\\\/bfnrt]'),
    _ESC_U,
)
# the same without the \n escape: one line of code inside a JSON string
_JLINE = _alt(
    _Piece('[^"\\\\\\x00-\\x1F]', '[^"\\\\\\x00-\\x1f]'),
    _Piece('"\\\\" ["\\\\/bfrt]', '\\\\["\\\\/bfrt]'),
    _ESC_U,
)
_STRING = _seq(_lit('"'), _star(_JCHAR), _lit('"'))
_INTEGER = _Piece('"-"? ("0" | [1-9] [0-9]{0,15})', "-?(?:0|[1-9][0-9]{0,15})")
_NUMBER = _seq(
    _INTEGER,
    _Piece('("." [0-9]{1,16})?', "(?:\\.[0-9]{1,16})?"),
    _Piece("([eE] [-+]? [0-9]{1,3})?", "(?:[eE][-+]?[0-9]{1,3})?"),
)
# a fenced block's body: anything without three backticks in a row
_FENCE_BODY = _Piece(
    '([^`] | "`" [^`] | "``" [^`])*',
    "(?:[^`]|`[^`]|``[^`])*",
)
_BARE_LINE = _Piece("[^`\\n]*", "[^`\\n]*")


def _code_string(function_name: str) -> _Piece:
    """A JSON string of Python source: import lines, then ``def <function_name>(`` and the rest."""
    imports = _upto(_seq(_alt(_lit("import "), _lit("from ")), _star(_JLINE), _lit("\\n")), MAX_IMPORT_LINES)
    return _seq(_lit('"'), imports, _lit(f"def {function_name}("), _star(_JCHAR), _lit('"'))


def _answer(function_name: str) -> _Piece:
    """The final answer: one python code block defining the function (imports may come first)."""
    imports = _upto(_seq(_alt(_lit("import "), _lit("from ")), _BARE_LINE, _lit("\n")), MAX_IMPORT_LINES)
    return _seq(_lit("```python\n"), imports, _lit(f"def {function_name}("), _FENCE_BODY, _lit("```"))


def _value(schema: Any, where: str, code: _Piece | None) -> _Piece:
    if not isinstance(schema, dict):
        raise GrammarError(f"{where}: a schema must be a JSON object, got {json.dumps(schema)[:60]}")
    unknown = (
        set(schema)
        - _ANNOTATIONS
        - {"type", "properties", "required", "additionalProperties"}
        - {
            "enum",
            "const",
            "items",
            "minimum",
            "maximum",
        }
    )
    if unknown:
        raise GrammarError(
            f"{where}: JSON schema keyword {sorted(unknown)[0]!r} cannot be turned into a grammar"
        )
    if "const" in schema:
        return _lit(json.dumps(schema["const"], ensure_ascii=False))
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not values:
            raise GrammarError(f"{where}: 'enum' must be a non-empty list")
        return _alt(*(_lit(json.dumps(v, ensure_ascii=False)) for v in values))
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, where, code)
    if kind == "array":
        items = schema.get("items")
        if items is None:
            raise GrammarError(f"{where}: an array needs 'items' to be turned into a grammar")
        item = _value(items, f"{where}[]", None)
        return _seq(_lit("["), _opt(_seq(item, _star(_seq(_lit(", "), item)))), _lit("]"))
    if kind in ("integer", "number") and ("minimum" in schema or "maximum" in schema):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (
            kind != "integer"
            or not isinstance(lo, int)
            or not isinstance(hi, int)
            or hi - lo > _MAX_ENUMERATED
        ):
            raise GrammarError(f"{where}: only a narrow integer range (minimum and maximum) fits a grammar")
        return _alt(*(_lit(str(i)) for i in range(lo, hi + 1)))
    if "minimum" in schema or "maximum" in schema:
        raise GrammarError(f"{where}: 'minimum'/'maximum' apply to numbers only")
    if kind == "string":
        return code if code is not None else _STRING
    if kind == "integer":
        return _INTEGER
    if kind == "number":
        return _NUMBER
    if kind == "boolean":
        return _alt(_lit("true"), _lit("false"))
    if kind == "null":
        return _lit("null")
    raise GrammarError(f"{where}: type {json.dumps(kind)} cannot be turned into a grammar")


def _object(schema: dict[str, Any], where: str, code: _Piece | None) -> _Piece:
    """Properties in schema order, ``json.dumps`` spacing; optional ones may be left out, unknown ones
    never appear (extra arguments are not admitted even where the schema leaves them open)."""
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        raise GrammarError(f"{where}: 'properties' must be an object and 'required' a list")
    if missing := [r for r in required if r not in props]:
        raise GrammarError(f"{where}: required property {missing[0]!r} is not among the properties")
    members = [
        (
            name,
            _seq(
                _lit(json.dumps(name) + ": "),
                _value(sub, f"{where}.{name}", code if name in CODE_PROPERTIES else None),
            ),
            name in required,
        )
        for name, sub in props.items()
    ]

    def tail(i: int, first: bool) -> _Piece:
        if i == len(members):
            return _lit("")
        _, member, needed = members[i]
        here = _seq(member if first else _seq(_lit(", "), member), tail(i + 1, False))
        return here if needed else _alt(here, tail(i + 1, first))

    return _seq(_lit("{"), tail(0, True), _lit("}"))


def _call(schema: dict[str, Any], function_name: str) -> _Piece:
    function = schema.get("function", schema)
    name = function.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
        raise GrammarError(f"tool schema without a usable name: {json.dumps(function)[:80]}")
    params = function.get("parameters", {"type": "object", "properties": {}})
    arguments = _value(params, f"tool {name}", _code_string(function_name))
    return _seq(
        _lit('<tool_call>\n{"name": ' + json.dumps(name) + ', "arguments": '),
        arguments,
        _lit("}\n</tool_call>"),
    )


@dataclass(frozen=True)
class ReplyGrammar:
    """A reply grammar: ``gbnf`` for llama.cpp and ``regex``, the same language in Python."""

    gbnf: str
    regex: str
    tools: tuple[str, ...]

    def accepts(self, reply: str) -> bool:
        """Whether ``reply`` is in the grammar's language (what llama.cpp could have generated)."""
        return _compiled(self.regex).fullmatch(reply) is not None


@functools.lru_cache(maxsize=64)
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.S)


def reply_grammar(
    schemas: Sequence[dict[str, Any]],
    function_name: str,
    tools: Sequence[str] | None = None,
    answer: bool = True,
) -> ReplyGrammar:
    """The grammar of one reply: a call to one of ``tools`` (default: every tool in ``schemas``) or, if
    ``answer``, a final answer defining ``function_name``."""
    if not function_name.isidentifier():
        raise GrammarError(f"function name {function_name!r} is not a Python identifier")
    offered = [s for s in schemas if tools is None or s.get("function", s).get("name") in tools]
    calls = [_call(s, function_name) for s in offered]
    if not calls and not answer:
        raise GrammarError("a reply grammar needs a tool to call or a final answer")
    reply = _alt(*calls, *([_answer(function_name)] if answer else []))
    names = tuple(s.get("function", s)["name"] for s in offered)
    return ReplyGrammar(gbnf=f"root ::= {reply.gbnf}\n", regex=reply.regex, tools=names)


def check_schemas(schemas: Sequence[dict[str, Any]]) -> None:
    """Raise :class:`GrammarError` now if any tool schema cannot become a grammar (called when the agent
    is built, so a bad schema stops the run at start with one line)."""
    reply_grammar(schemas, "f")
