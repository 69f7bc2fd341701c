"""The AWS boundary: the one place that builds boto3 sessions and clients, and the only module that catches botocore.

Adapters receive clients from a :class:`ClientFactory` (nothing is built at import) and call AWS
through :func:`call`/:func:`paginate`; ``ClientError`` codes map to the AwsError family with
``aws_error_code``, ``request_id`` and ``region`` as fields. ``endpoint_url`` (or
``GEMMASERVE_AWS_ENDPOINT_URL``) points every client at one local server — moto's, in tests.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from gemmaserve.errors import (
    AwsAccessDenied,
    AwsError,
    AwsResourceNotFound,
    CapacityUnavailable,
    CredentialsMissing,
    EndpointNotFound,
    QuotaExceeded,
    UsageError,
)

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
        # Cached per (service, region): botocore refreshes a session's refreshable credentials
        # inside each client, so reuse is safe.
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


# Errors: botocore's exceptions → the AwsError family.

_NOT_FOUND_CODES = {
    "ResourceNotFound",
    "ResourceNotFoundException",
    "NoSuchEntity",
    "NoSuchEntityException",
    "RepositoryNotFoundException",
    "NoSuchResourceException",
}
_ACCESS_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnrecognizedClientException"}
_CAPACITY_CODES = {"InsufficientInstanceCapacity", "InsufficientCapacity", "CapacityError"}
_CREDENTIAL_CODES = {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "InvalidSignatureException"}


def call(region: str, method: Callable[..., Any], /, **params: Any) -> Any:
    """Call one boto3 client method; translate any botocore failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return method(**params)
    except ClientError as exc:
        raise translate_client_error(exc, region=region, operation=getattr(method, "__name__", "")) from exc
    except BotoCoreError as exc:
        raise translate_botocore_error(exc, region=region) from exc


def paginate(region: str, client: Any, operation: str, /, **params: Any) -> Iterator[dict[str, Any]]:
    """Pages of a paginated operation, failures translated."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield from client.get_paginator(operation).paginate(**params)
    except ClientError as exc:
        raise translate_client_error(exc, region=region, operation=operation) from exc
    except BotoCoreError as exc:
        raise translate_botocore_error(exc, region=region) from exc


def error_fields(response: dict[str, Any], region: str) -> dict[str, Any]:
    error = response.get("Error", {})
    meta = response.get("ResponseMetadata", {})
    return {
        "aws_error_code": error.get("Code"),
        "request_id": meta.get("RequestId"),
        "region": region,
    }


def translate_client_error(exc: Any, *, region: str, operation: str = "") -> AwsError:
    """One ``ClientError`` → the matching AwsError subclass."""
    return translate_error_response(exc.response, region=region, operation=operation, default_message=str(exc))


def translate_error_response(
    response: dict[str, Any], *, region: str, operation: str = "", default_message: str = ""
) -> AwsError:
    """An error response in botocore's parsed shape (``Error.Code``/``Message``) → an AwsError."""
    fields = error_fields(response, region)
    code = fields["aws_error_code"] or ""
    message = response.get("Error", {}).get("Message") or default_message or code
    if message.lstrip().startswith("<"):  # an HTML error page (a proxy, or a local fake) says nothing useful
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = f"the service answered HTTP {status or code} with an HTML page"
    message = message if len(message) <= 500 else message[:500] + "…"
    where = f" ({operation}, {region})" if operation else f" ({region})"
    lowered = message.lower()
    if code == "ResourceLimitExceeded":
        return QuotaExceeded(
            f"SageMaker quota exceeded{where}: {message}",
            hint="Check quotas with: gemmaserve sagemaker preflight … ; request an increase for "
            "'ml.<type> for endpoint usage' in Service Quotas, or try another --region.",
            **fields,
        )
    if code in _CAPACITY_CODES:
        return CapacityUnavailable(
            f"No capacity{where}: {message}", hint="Try another region (--regions) or instance type.", **fields
        )
    if code in _NOT_FOUND_CODES or (code == "ValidationException" and "could not find" in lowered):
        if "endpoint " in lowered and "endpoint configuration" not in lowered and "endpoint-config" not in lowered:
            return EndpointNotFound(
                f"Endpoint not found{where}: {message}", hint="List yours with: gemmaserve sagemaker list", **fields
            )
        return AwsResourceNotFound(f"Not found{where}: {message}", **fields)
    if code == "ValidationError" and "not found" in lowered and "endpoint" in lowered:
        return EndpointNotFound(
            f"Endpoint not found{where}: {message}", hint="List yours with: gemmaserve sagemaker list", **fields
        )
    if code in _ACCESS_CODES:
        return AwsAccessDenied(
            f"Access denied{where}: {message}",
            hint="The AWS identity in use lacks this permission; see docs/sagemaker.md for the policy.",
            **fields,
        )
    if code in _CREDENTIAL_CODES:
        return CredentialsMissing(
            f"AWS rejected the credentials{where}: {message}",
            hint="Refresh them (aws sso login, or new keys).",
            **fields,
        )
    if code in ("ValidationException", "ValidationError", "InvalidParameterValue"):
        return AwsError(f"AWS rejected the request{where}: {message}", **fields)
    return AwsError(f"AWS call failed{where}: {code}: {message}", **fields)


CREDENTIALS_HINT = (
    "Configure credentials (aws configure), log in to an SSO profile (aws sso login --profile NAME), "
    "or set AWS_PROFILE to a profile that exists; check with: aws sts get-caller-identity"
)


def translate_botocore_error(exc: Exception, *, region: str) -> AwsError:
    from botocore.exceptions import (
        CredentialRetrievalError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
        ProfileNotFound,
        SSOError,
        TokenRetrievalError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CredentialsMissing(
            f"No AWS credentials were found for {region}, so nothing was sent to AWS.",
            hint=CREDENTIALS_HINT + ".",
            region=region,
        )
    # A profile that exists but cannot give credentials: an expired SSO session, a failing
    # credential_process, a profile removed while the process ran.
    if isinstance(exc, CredentialRetrievalError | TokenRetrievalError | SSOError | ProfileNotFound):
        return CredentialsMissing(
            f"The AWS credentials could not be loaded ({exc}), so nothing was sent to AWS in {region}.",
            hint=CREDENTIALS_HINT + ".",
            region=region,
        )
    if isinstance(exc, EndpointConnectionError):
        return AwsError(f"Cannot reach AWS in {region}: {exc}", hint="Check the network and --region.", region=region)
    if isinstance(exc, NoRegionError):
        return AwsError("No AWS region given.", hint="Pass --region.", region=region)
    if isinstance(exc, ParamValidationError):
        raise UsageError(f"Invalid request parameters: {exc}") from exc
    return AwsError(f"AWS call failed in {region}: {exc}", region=region)


def is_not_found(error: AwsError) -> bool:
    return isinstance(error, AwsResourceNotFound | EndpointNotFound)


def credentials_provider_from_session(session: Any) -> Callable[[], Any]:
    """A callable giving frozen credentials; refreshable ones refresh themselves on each call when near expiry."""

    def provider() -> Any:
        credentials = session.get_credentials()
        if credentials is None:
            raise CredentialsMissing(
                "No AWS credentials found.", hint="Configure them (aws configure, AWS_PROFILE, or an instance role)."
            )
        return credentials.get_frozen_credentials()

    return provider
