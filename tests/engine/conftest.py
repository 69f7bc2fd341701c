"""The engine tier's fixtures (tests/support/engine/fixtures.py, also used by the other tiers' helpers)."""

from tests.support.engine.fixtures import *  # noqa: F403
