"""The smallest agent: no LLM, it returns the first context snippet as its answer.

    agentbench run --agent examples.simple_agent:agent --conditions rag,oracle,distractor --limit 20

An agent plug-in is any callable taking the task (``task.description``, ``task.signature``,
``task.function_name``, ``task.context``: the snippets it is given) and returning code or a message
containing code; ``async def`` works too. This one measures how far "trust the top hit" gets: its rag pass
rate equals the retriever's exec@1, and every distractor's bug is inherited.
"""

from __future__ import annotations

from agentbench import Task


def agent(task: Task) -> str:
    if task.context:
        return task.context[0]
    # no context (closed_book): a stub that fails the tests honestly
    return f"{task.signature}\n    raise NotImplementedError\n"
