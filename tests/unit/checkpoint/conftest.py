"""The checkpoint tests' fixtures (tests/support/checkpoint/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.checkpoint.fixtures import *  # noqa: F403
