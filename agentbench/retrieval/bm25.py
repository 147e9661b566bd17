"""BM25 over code-aware tokens (bm25s), ranked through the same exact interface as dense stores.

Why a custom tokenizer: a whitespace or English tokenizer sees ``shoelace_polygon_area`` or ``maxValue`` as
one opaque word that no natural-language query contains, and drops the operators in which a canonical and
its distractor differ. Identifiers are kept whole and also split on snake_case and camelCase; Python
keywords and operators are kept as tokens; no stop words are removed (``not``, ``in``, ``is`` carry meaning
in code). The index is rebuilt in memory on every run: tokenizing a pool takes well under a second.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..pools.models import Snippet
from .embedders import BM25Embedder
from .search import Searcher

__all__ = ["tokenize_code", "split_identifier", "BM25Searcher", "TOKENIZER_VERSION"]

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


class BM25Searcher(Searcher):
    """In-memory bm25s index over one pool's corpus."""

    def __init__(self, embedder: BM25Embedder, snippets: Sequence[Snippet]) -> None:
        super().__init__(embedder.name, snippets)
        import bm25s

        self.embedder = embedder
        self._bm25 = bm25s.BM25(k1=embedder.k1, b=embedder.b, method="lucene")
        if snippets:
            self._bm25.index([tokenize_code(s.code) for s in snippets], show_progress=False)

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(queries), self.n_docs), dtype=np.float64)
        if not self.n_docs:
            return out
        for i, query in enumerate(queries):
            token_ids = self._bm25.get_tokens_ids(tokenize_code(query))
            if token_ids:
                out[i] = self._bm25.get_scores(token_ids)
        return out
