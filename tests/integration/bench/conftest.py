"""The bench tests' fixtures (tests/support/bench/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.bench.fixtures import *  # noqa: F403
