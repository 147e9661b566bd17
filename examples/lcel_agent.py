"""A LangChain LCEL agent: a prompt template piped into a model step, with the model reached through LiteLLM.

    agentbench run --agent examples.lcel_agent:agent --retriever examples.hybrid:retriever --limit 10

agentbench invokes a Runnable with a dict of the prompt-template variables (``task``, ``signature``,
``function_name``, ``context``: the snippets rendered as code blocks) plus ``snippets`` (the list). The
model step uses agentbench's LiteLLM client, so any LiteLLM model string works (``gpt-4o``,
``ollama/...``) and replies are cached; in your own chain use any LangChain chat model instead. It returns
the message with ``usage_metadata``, so the run records token counts. The model is
``$AGENTBENCH_EXAMPLE_LLM``, by default the offline ``local/qwen2.5-coder-0.5b``.
"""

from __future__ import annotations

import os

from langchain_core.messages import AIMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda

from agentbench.llm import LLMClient

MODEL = os.environ.get("AGENTBENCH_EXAMPLE_LLM", "local/qwen2.5-coder-0.5b")
_ROLES = {"human": "user", "ai": "assistant", "system": "system"}

prompt = ChatPromptTemplate.from_messages(
    [
        ("system", "You write correct, self-contained Python 3 functions using only the standard library."),
        (
            "human",
            "Task: {task}\n\nCode from the codebase that may help (it may contain bugs):\n\n{context}\n\n"
            "Write the function with exactly this signature:\n\n```python\n{signature}\n```\n\n"
            "Reply with one ```python code block.",
        ),
    ]
)

_client: LLMClient | None = None


def _llm() -> LLMClient:
    global _client
    if _client is None:  # built on first use, so importing the module stays cheap
        _client = LLMClient(MODEL, temperature=0.0, max_tokens=512)
        _client.check()
    return _client


async def _complete(value: PromptValue) -> AIMessage:
    messages = [{"role": _ROLES.get(m.type, m.type), "content": m.content} for m in value.to_messages()]
    result = await _llm().complete(messages)
    if not result.ok:
        raise RuntimeError(result.error)
    return AIMessage(
        content=result.text,
        usage_metadata={
            "input_tokens": result.prompt_tokens,
            "output_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        },
    )


agent = prompt | RunnableLambda(_complete)
