"""What the tests share: the scripted model server (fakellm, its Anthropic format and prompt caches), the agent's
and the sessions' fixtures, the scenarios the benchmarks run too, PostgreSQL, npm tools, a terminal, git, trust,
a uid of its own. Imported as `support.NAME` (tests/ is on the path: pytest puts it there, the benchmarks and the
worker scripts add it)."""
