"""SageMaker resource names: validation before any call, and the names a deploy derives (pure).

Model, EndpointConfig and Endpoint names share one rule in the service model:
``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`` (1–63 characters, letters, digits and
hyphens, no leading/trailing hyphen). A deploy names its model and config after
the endpoint so a partial deploy can be found and deleted by name alone.
"""

from __future__ import annotations

import re

from gemmaserve.errors import UsageError

MAX_NAME_LENGTH = 63
MODEL_SUFFIX = "-model"
CONFIG_SUFFIX = "-config"
MAX_ENDPOINT_NAME_LENGTH = MAX_NAME_LENGTH - max(len(MODEL_SUFFIX), len(CONFIG_SUFFIX))
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
VARIANT_NAME = "AllTraffic"


def validate_name(name: str, *, kind: str = "endpoint", max_length: int = MAX_NAME_LENGTH) -> str:
    """Return ``name`` if SageMaker accepts it for ``kind``; raise :class:`UsageError` saying why not."""
    if not name:
        raise UsageError(f"The {kind} name is empty.", hint="Give a name such as gemma4-e2b-t4.")
    if len(name) > max_length:
        raise UsageError(
            f"The {kind} name {name!r} is {len(name)} characters; at most {max_length} are allowed.",
            hint=f"Use a shorter name (≤ {max_length} characters).",
            name=name,
        )
    if not _NAME.match(name):
        raise UsageError(
            f"The {kind} name {name!r} is not valid: use letters, digits and hyphens, "
            "starting and ending with a letter or digit.",
            hint="For example: gemma4-e2b-t4",
            name=name,
        )
    return name


def validate_endpoint_name(name: str) -> str:
    """An endpoint name short enough that its derived model and config names are valid too."""
    return validate_name(name, kind="endpoint", max_length=MAX_ENDPOINT_NAME_LENGTH)


def model_name_for(endpoint_name: str) -> str:
    return validate_name(endpoint_name + MODEL_SUFFIX, kind="model")


def config_name_for(endpoint_name: str) -> str:
    return validate_name(endpoint_name + CONFIG_SUFFIX, kind="endpoint config")


def default_endpoint_name(model_key: str, gpu_key: str) -> str:
    """A readable endpoint name from the catalog keys, e.g. ``gemma-4-e2b`` + ``t4`` → ``gemma-4-e2b-t4``."""
    cleaned = re.sub(r"[^a-zA-Z0-9]+", "-", f"{model_key}-{gpu_key}").strip("-")
    return validate_endpoint_name(cleaned[:MAX_ENDPOINT_NAME_LENGTH].strip("-"))
