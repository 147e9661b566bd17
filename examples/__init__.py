"""Example plug-ins for ``agentbench run --retriever ... --agent ...`` (see docs/plugins.md)."""
