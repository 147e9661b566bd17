"""``python -m agentbench.llm [MODEL ...]``: assemble and verify local model weights ahead of time."""

from .weights import main

raise SystemExit(main())
