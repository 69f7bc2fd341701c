"""The serve tests' fixtures (tests/support/serve/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.serve.fixtures import *  # noqa: F403
