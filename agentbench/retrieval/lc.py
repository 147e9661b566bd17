"""LangChain adapters (imported only when asked for: langchain_core is slow to import).

``SearcherRetriever`` wraps any :class:`~.hits.Searcher`, so the agent sees exactly the ranking the
retrieval metrics scored (exact scores, deterministic ties). ``LangChainEmbeddings`` lets a
``langchain_chroma.Chroma`` vector store embed queries with an agentbench embedder (and its cache).
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from .embedders import DenseEmbedder

__all__ = ["SearcherRetriever", "LangChainEmbeddings"]


class SearcherRetriever(BaseRetriever):
    """Top-``k`` snippets as Documents: ``page_content`` is the code; metadata has corpus_id, rank, score.

    Labels and bug types are deliberately absent: the agent must not see which snippet is correct.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: Any
    k: int = 10

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(
                page_content=hit.code,
                metadata={"corpus_id": hit.corpus_id, "rank": hit.rank, "score": hit.score},
            )
            for hit in self.searcher.search(query, self.k)
        ]


class LangChainEmbeddings(Embeddings):
    """An agentbench dense embedder seen through LangChain's ``Embeddings`` interface."""

    def __init__(self, embedder: DenseEmbedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed_documents(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed_query(text).tolist()
