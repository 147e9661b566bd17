"""Code-aware tokens for BM25, and the version that names them in every BM25 config key.

Why a custom tokenizer: a whitespace or English tokenizer sees ``shoelace_polygon_area`` or ``maxValue`` as
one opaque word that no natural-language query contains, and drops the operators in which a canonical and
its distractor differ. Identifiers are kept whole and also split on snake_case and camelCase; Python
keywords and operators are kept as tokens; no stop words are removed (``not``, ``in``, ``is`` carry meaning
in code). A leaf module: :mod:`.embedders` reads :data:`TOKENIZER_VERSION`, :mod:`.bm25` the tokenizer.
"""

from __future__ import annotations

import re

__all__ = ["tokenize_code", "split_identifier", "TOKENIZER_VERSION"]

TOKENIZER_VERSION = "code-v1"

_TOKEN = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*"  # identifiers and keywords
    r"|\d+(?:\.\d+)?"  # numbers
    r"|\*\*=?|//=?|>>=?|<<=?|[=!<>]=|->|:="  # multi-character operators
    r"|[-+*/%&|^@]=|[-+*/%<>=&|^~@]"  # augmented assignment and single-character operators
)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+")  # digits stay on their word: ipv4


def split_identifier(word: str) -> list[str]:
    """``parse_HTTPResponse2`` -> ``['parse', 'http', 'response2']``."""
    return [p.lower() for part in word.split("_") for p in _CAMEL.findall(part)]


def tokenize_code(text: str) -> list[str]:
    """Lower-cased identifiers (whole and split), numbers and operators, in order."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        tok = match.group()
        if tok[0].isalpha() or tok[0] == "_":
            whole = tok.lower()
            out.append(whole)
            parts = split_identifier(tok)
            if parts != [whole]:
                out.extend(parts)
        else:
            out.append(tok)
    return out
