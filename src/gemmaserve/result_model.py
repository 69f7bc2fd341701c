"""The base of every action's result: its data, and ``ok``, whether it is the outcome the action exists for.

``ok`` is computed from the result's own fields, so it can never disagree with them; it is in the JSON
(``--json`` and the MCP structured content) and it alone decides the CLI's exit status
(:func:`gemmaserve.cli.errors.exit_code_for`). A result that cannot fail (a plan, a log tail) keeps the
default. One that can says so in :meth:`ActionResult.succeeded`: doctor with a required check unknown or
failed, a dead server, a check that found an error. ``interrupted`` marks a run stopped part way
(exit 130) that still returns what it measured.
"""

from __future__ import annotations

from pydantic import BaseModel, computed_field


class ActionResult(BaseModel):
    """What an action returns. Subclasses that can end badly override :meth:`succeeded`."""

    @computed_field(  # type: ignore[prop-decorator]
        description="True when the action reached the outcome it exists for; the CLI exits 1 when false."
    )
    @property
    def ok(self) -> bool:
        return self.succeeded()

    def succeeded(self) -> bool:
        """Whether this result is a good outcome (the default: the action returned, so it did what was asked)."""
        return True

    @property
    def interrupted(self) -> bool:
        """Whether the run was stopped part way and this is what it got before (the CLI exits 130)."""
        return False
