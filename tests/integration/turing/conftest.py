"""The turing tests' fixtures (tests/support/turing/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.turing.fixtures import *  # noqa: F403
