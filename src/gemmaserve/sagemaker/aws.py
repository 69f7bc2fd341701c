"""The boundary where botocore exceptions become gemmaserve errors — the only module that catches them.

Every adapter calls AWS through :func:`call`; ``ClientError`` codes map to the
AwsError family with ``aws_error_code``, ``request_id`` and ``region`` as fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

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
