"""The sagemaker tests' fixtures (tests/support/sagemaker/fixtures.py, shared by the unit and integration tiers)."""

from tests.support.sagemaker.fixtures import *  # noqa: F403
