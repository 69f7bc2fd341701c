"""The one place that builds boto3 sessions and clients (adapters receive clients; nothing is built at import).

``endpoint_url`` (or ``GEMMASERVE_AWS_ENDPOINT_URL``) points every client at one
local server — moto's, in tests. Clients are cached per (service, region): botocore
refreshes a session's refreshable credentials inside each client, so reuse is safe.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol

ENDPOINT_URL_ENV = "GEMMASERVE_AWS_ENDPOINT_URL"
# Standard retries with a small budget: a deploy waits on its own terms, and
# throttling on Describe* during a long wait must not surface as a failure.
_RETRIES = {"mode": "standard", "max_attempts": 5}


class ClientFactory(Protocol):
    """Gives a boto3 client for a service in a region."""

    def __call__(self, service: str, region: str) -> Any: ...


class Boto3ClientFactory:
    """Builds clients from one boto3 Session; thread-safe (sessions are not, so creation is locked)."""

    def __init__(self, *, profile: str | None = None, endpoint_url: str | None = None) -> None:

        self.profile = profile
        self.endpoint_url = endpoint_url if endpoint_url is not None else os.environ.get(ENDPOINT_URL_ENV) or None
        self.session = aws_session(profile)
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def __call__(self, service: str, region: str) -> Any:
        from botocore.config import Config
        from botocore.exceptions import ProfileNotFound

        key = (service, region)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                try:
                    client = self.session.client(
                        service,
                        region_name=region,
                        endpoint_url=self.endpoint_url,
                        config=Config(retries=_RETRIES, connect_timeout=10, read_timeout=70),
                    )
                except ProfileNotFound:
                    # The session reads the profile lazily: AWS_PROFILE may have changed since it was made.
                    raise profile_not_found(self.profile) from None
                self._clients[key] = client
            return client

    def close(self) -> None:
        """Close every client's connection pool (long-lived processes and tests)."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def credentials_provider(self) -> Any:
        """A zero-argument callable returning current (refreshed) frozen credentials, for SigV4 signing."""
        from gemmaserve.sagemaker.aws import credentials_provider_from_session

        return credentials_provider_from_session(self.session)


def default_region(explicit: str | None = None) -> str:
    """``explicit``, else the AWS environment/profile region, else us-east-1; normalised and checked."""
    from gemmaserve.sagemaker.inputs import normalise_region

    if explicit:
        return normalise_region(explicit)
    return normalise_region(os.environ.get("AWS_REGION") or aws_session(None).region_name or "us-east-1")


def aws_session(profile: str | None) -> Any:
    """A boto3 Session; a profile that does not exist (often a stale AWS_PROFILE) is one clear error."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        return boto3.Session(profile_name=profile)
    except ProfileNotFound:
        raise profile_not_found(profile) from None


def profile_not_found(profile: str | None) -> Exception:
    """The one-paragraph error for a profile that is not configured, with the commands that fix it."""
    from gemmaserve.errors import CredentialsMissing

    name = profile or os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "?"
    source = (
        "given"
        if profile
        else "named by AWS_PROFILE"
        if os.environ.get("AWS_PROFILE")
        else "named by AWS_DEFAULT_PROFILE"
    )
    return CredentialsMissing(
        f"The AWS profile {name!r} ({source}) is not in ~/.aws/config or ~/.aws/credentials, so no AWS "
        "credentials or region can be read and nothing was sent to AWS.",
        hint=f"Create it (aws configure --profile {name}, or aws configure sso), log in (aws sso login "
        f"--profile {name}), or unset AWS_PROFILE to use the default credentials.",
        profile=name,
    )
