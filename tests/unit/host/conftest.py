"""The host tests' fixtures (tests/support/host/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.host.fixtures import *  # noqa: F403
