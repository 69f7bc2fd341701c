"""Creating and replacing endpoints: ``preflight`` (every check first), ``endpoint`` (plan, create, fall back
across regions), ``teardown`` (delete by name, the deploy journal, signals during a deploy), ``update``
(blue/green) and ``update_gate`` (its quality and speed gate)."""
