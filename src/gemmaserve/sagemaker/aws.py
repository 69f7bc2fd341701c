"""The AWS boundary: the one place that builds boto3 sessions and clients, and the only module that catches botocore.

Adapters receive clients from a :class:`ClientFactory` (nothing is built at import) and call AWS
through :func:`call`/:func:`paginate`; ``ClientError`` codes map to the AwsError family with
``aws_error_code``, ``request_id`` and ``region`` as fields. ``endpoint_url`` (or
``GEMMASERVE_AWS_ENDPOINT_URL``) points every client at one local server — moto's, in tests.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Protocol, Self

from pydantic import BaseModel

from gemmaserve.cost import PriceLookup, PriceQuote, catalog_price
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
from gemmaserve.progress import CancelToken, ProgressCallback, utc_now

ENDPOINT_URL_ENV = "GEMMASERVE_AWS_ENDPOINT_URL"
_REGION_SHAPE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")
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


# Regions: botocore's endpoint data.
# The service model and the region list are data bundled with botocore. They are read with botocore's
# loader alone, not through a session: a session reads the user's profile first, so a stale AWS_PROFILE
# would break even a dry run that never talks to AWS.
@functools.cache
def _loader() -> Any:
    import botocore.loaders

    return botocore.loaders.create_loader()


@functools.cache
def service_model() -> Any:
    from botocore.model import ServiceModel

    return ServiceModel(_loader().load_service_model("sagemaker", "service-2"), service_name="sagemaker")


@functools.cache
def _endpoint_resolver() -> Any:
    from botocore.regions import EndpointResolver

    return EndpointResolver(_loader().load_data("endpoints"))


@functools.cache
def sagemaker_regions() -> tuple[str, ...]:
    """Every region botocore's endpoint data lists for SageMaker, all partitions (``aws`` first)."""
    resolver = _endpoint_resolver()
    regions: list[str] = []
    for partition in resolver.get_available_partitions():
        regions.extend(resolver.get_available_endpoints(service_model().endpoint_prefix, partition))
    return tuple(regions)


@functools.cache
def commercial_regions() -> tuple[str, ...]:
    """The standard partition's SageMaker regions: what a sweep covers with one set of credentials."""
    return tuple(_endpoint_resolver().get_available_endpoints(service_model().endpoint_prefix, "aws"))


def normalise_region(text: str) -> str:
    """``US-EAST-1`` → ``us-east-1``; a list, spaces or a region SageMaker does not have → UsageError."""
    raw = text
    value = text.strip().lower()
    if "," in value:
        raise UsageError(
            f"--region takes one region, not {raw!r}.",
            hint=f"Use --regions {value.replace(' ', '')} to try several in order.",
            region=raw,
        )
    if not _REGION_SHAPE.match(value):
        raise UsageError(f"{raw!r} is not an AWS region name.", hint="Region names look like us-east-1.", region=raw)
    if value not in sagemaker_regions():
        raise UsageError(
            f"SageMaker is not available in {value!r} (per botocore's endpoint data).",
            hint="SageMaker regions: " + ", ".join(commercial_regions()),
            region=raw,
        )
    return value


# The deps object every adapter takes: which clients, which clock, how to wait, whom to tell, when to stop.

Clock = Callable[[], datetime]
_DEFAULT_FACTORIES: dict[str | None, Boto3ClientFactory] = {}


def _now() -> datetime:
    return utc_now()


def default_factory() -> ClientFactory:
    """One factory per process (per endpoint override), so connections are reused, not leaked."""
    key = os.environ.get(ENDPOINT_URL_ENV) or None
    if key not in _DEFAULT_FACTORIES:
        _DEFAULT_FACTORIES[key] = Boto3ClientFactory(endpoint_url=key)
    return _DEFAULT_FACTORIES[key]


@dataclass(frozen=True)
class Deps:
    """The seams a SageMaker call may replace, held together (a test derives one with :meth:`but`).

    ``factory`` gives boto3 clients (None: the process's own, built on first use; tests pass moto's);
    ``clock`` is now() (None: real UTC time); ``sleep`` a test's scripted sleep (None: real time, which a
    cancel cuts short); ``progress`` receives :class:`~gemmaserve.progress.ProgressEvent` values;
    ``cancel`` is checked around each wait and each create.
    """

    factory: ClientFactory | None = None
    clock: Clock | None = None
    sleep: Callable[[float], None] | None = None
    progress: ProgressCallback | None = None
    cancel: CancelToken | None = None

    @property
    def clients(self) -> ClientFactory:
        """The factory, the process's own if none was given (built here: this is where credentials are read)."""
        return self.factory if self.factory is not None else default_factory()

    def now(self) -> datetime:
        return self.clock() if self.clock is not None else _now()

    def real_sleep(self) -> Callable[[float], None]:
        """``sleep``, else ``time.sleep`` (for waits that need a callable, not the cancellable default)."""
        import time

        return self.sleep or time.sleep

    def but(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return replace(self, **changes)


def default_region(explicit: str | None = None) -> str:
    """``explicit``, else the AWS environment/profile region, else us-east-1; normalised and checked."""
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


# --- pricing ---
# Live on-demand prices from the AWS Pricing API, falling back to the catalog's dated list price (adapter).
#
# The Pricing API answers only in a few regions (us-east-1 here) whatever region is
# priced; SageMaker real-time hosting products carry a ``usagetype`` ending in
# ``Host:<instance type>``.


PRICING_REGION = "us-east-1"
PRICING_SOURCE = "AWS Pricing API (AmazonSageMaker, on-demand)"


def pricing_api_price(pricing: Any, instance_type: str, region: str, *, today: date) -> PriceQuote | None:
    """The on-demand hosting price of ``instance_type`` in ``region``, or None when the API has none."""
    filters = [
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
    ]
    for page in paginate(PRICING_REGION, pricing, "get_products", ServiceCode="AmazonSageMaker", Filters=filters):
        for item in page.get("PriceList", []):
            product = json.loads(item) if isinstance(item, str) else item
            usage = product.get("product", {}).get("attributes", {}).get("usagetype", "")
            if not usage.endswith(f"Host:{instance_type}"):
                continue
            usd = _on_demand_usd(product)
            if usd is not None and usd > 0:
                return PriceQuote(
                    instance_type=instance_type,
                    usd_per_hour=usd,
                    region=region,
                    date=today.isoformat(),
                    source=PRICING_SOURCE,
                )
    return None


def _on_demand_usd(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if dimension.get("unit", "").lower() in ("hrs", "hours", "hour"):
                value = dimension.get("pricePerUnit", {}).get("USD")
                if value is not None:
                    return float(value)
    return None


def make_price_lookup(factory: ClientFactory | None, *, today: date) -> PriceLookup:
    """Live prices when a factory (credentials) is given, else or on failure the catalog; cached per process."""
    cache: dict[tuple[str, str], PriceQuote | None] = {}

    def lookup(instance_type: str, region: str) -> PriceQuote | None:
        key = (instance_type, region)
        if key not in cache:
            quote = None
            if factory is not None:
                try:
                    quote = pricing_api_price(factory("pricing", PRICING_REGION), instance_type, region, today=today)
                except AwsError:
                    quote = None  # no pricing:GetProducts permission, or offline: the dated list price will do
            cache[key] = quote or catalog_price(instance_type, region)
        return cache[key]

    return lookup


# --- quota ---
# SageMaker endpoint quotas: the limit from Service Quotas minus what existing endpoints hold.
#
# A variant with InstancePools holds quota for every type it lists, so each listed type
# counts the variant's desired instance count. Arithmetic pure; adapters receive clients.


_HOLDING_STATUSES = {"Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "OutOfService"}


class QuotaCheck(BaseModel):
    region: str
    instance_type: str
    quota_name: str
    limit: float | None  # None: Service Quotas did not say (unknown, never ok)
    used: int | None
    needed: int
    ok: bool | None

    @property
    def free(self) -> float | None:
        return None if self.limit is None or self.used is None else self.limit - self.used


def endpoint_quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def quota_verdict(limit: float | None, used: int | None, needed: int) -> bool | None:
    """Pure: True if ``needed`` more instances fit, False if not, None if unknown."""
    if limit is None or used is None:
        return None
    return limit - used >= needed


def endpoint_quota_limits(sq: Any, *, region: str) -> dict[str, float]:
    """Every ``… for endpoint usage`` quota value of the account in ``region``, by quota name."""
    limits: dict[str, float] = {}
    for page in paginate(region, sq, "list_service_quotas", ServiceCode="sagemaker"):
        for quota in page.get("Quotas", []):
            name = quota.get("QuotaName", "")
            if name.endswith(" for endpoint usage") and "Value" in quota:
                limits[name] = float(quota["Value"])
    return limits


def instances_held(sm: Any, *, region: str) -> dict[str, int]:
    """Instances held per type by this account's endpoints in ``region`` (pool types each count in full)."""
    held: dict[str, int] = {}
    for page in paginate(region, sm, "list_endpoints"):
        for summary in page.get("Endpoints", []):
            if summary.get("EndpointStatus") not in _HOLDING_STATUSES:
                continue
            try:
                endpoint = call(region, sm.describe_endpoint, EndpointName=summary["EndpointName"])
                config = call(region, sm.describe_endpoint_config, EndpointConfigName=endpoint["EndpointConfigName"])
            except AwsError as error:
                if is_not_found(error):
                    continue  # deleted between the list and the describe
                raise
            counts = {v.get("VariantName"): v for v in endpoint.get("ProductionVariants", [])}
            for variant in config.get("ProductionVariants", []):
                live = counts.get(variant.get("VariantName"), {})
                count = int(
                    live.get("DesiredInstanceCount")
                    or live.get("CurrentInstanceCount")
                    or variant.get("InitialInstanceCount")
                    or 0
                )
                types = [pool["InstanceType"] for pool in variant.get("InstancePools") or []]
                if not types and variant.get("InstanceType"):
                    types = [variant["InstanceType"]]
                for instance_type in types:
                    held[instance_type] = held.get(instance_type, 0) + count
    return held


def check_quotas(sq: Any, sm: Any, instance_types: list[str], needed: int, *, region: str) -> list[QuotaCheck]:
    """One check per type the deploy will list (a pool needs quota for each of its types)."""
    limits = endpoint_quota_limits(sq, region=region)
    held = instances_held(sm, region=region)
    checks = []
    for instance_type in instance_types:
        name = endpoint_quota_name(instance_type)
        limit = limits.get(name)
        used = held.get(instance_type, 0)
        checks.append(
            QuotaCheck(
                region=region,
                instance_type=instance_type,
                quota_name=name,
                limit=limit,
                used=used,
                needed=needed,
                ok=quota_verdict(limit, used, needed),
            )
        )
    return checks
