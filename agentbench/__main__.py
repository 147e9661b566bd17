from agentbench.cli import main

main()
