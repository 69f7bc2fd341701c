"""vLLM on this host: a launcher behind doctor's interlock, and its supervisor.

``records`` (state file, process identity, locks), ``launcher`` (interlock, argv,
detached start, readiness), ``supervisor`` (status, stop, logs), ``api`` (the
plan-driven entry points the CLI and the MCP server call).
"""
