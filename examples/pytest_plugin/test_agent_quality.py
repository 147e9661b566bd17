"""The agent (team_agent.py) must not be worse than the committed baseline run (baseline/).

    pytest --agentbench-save-baseline   # once, and when a change is meant to move the numbers: commit baseline/
    pytest --junitxml=agentbench.xml    # in CI: fails with the comparison table when a gate fails

AGENTBENCH_LIMIT, AGENTBENCH_MARGIN and AGENTBENCH_SANDBOX make a quick local check possible (few
queries need a wide margin: with 8 queries and no change the interval can be as wide as +-0.32).
"""

from __future__ import annotations

import os

LIMIT = int(os.environ.get("AGENTBENCH_LIMIT", "100"))
MARGIN = float(os.environ.get("AGENTBENCH_MARGIN", "0.1"))
SANDBOX = os.environ.get("AGENTBENCH_SANDBOX", "docker")


def test_agent_is_not_worse_than_the_baseline(agentbench_eval) -> None:
    run = agentbench_eval(
        pool="core",
        agent="team_agent:agent",
        embedder="bm25",
        conditions=["rag", "oracle"],
        limit=LIMIT,
        sandbox=SANDBOX,
    )
    # the baseline directory comes from pytest.ini (agentbench_baseline) or --agentbench-baseline DIR
    run.check(non_inferior={"rag.pass": MARGIN, "oracle.pass": MARGIN})
