"""Example plug-ins for ``agentbench run --retriever ... --agent ...`` (see README, "Testing your own agent")."""
