"""The mcp tests' fixtures (tests/support/mcp/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.mcp.fixtures import *  # noqa: F403
