"""What a request to an action is: one pydantic model per action, which both front ends are built from.

A request model owns its fields' names, defaults, ranges and normalisation, its cross-field rules, what the
action does to the world (:attr:`ActionRequest.effect`) and whether that needs a person's agreement
(:attr:`ActionRequest.confirmation`).
The CLI turns each field into an option named after it (``max_model_len`` → ``--max-model-len``,
:mod:`gemmaserve.cli.options`); the MCP server uses the model as the tool's input schema, unknown arguments
rejected (:mod:`gemmaserve.mcp_server.framework`). So a knob is declared once, here or in a shared block
such as :class:`ServingSettings`, and ``tests/unit/test_request_agreement.py`` fails if a front end drifts.

Front-end details that are not part of the request (a short flag, a positional argument, an older spelling
kept for scripts) ride along as a :class:`Cli` marker in the field's ``Annotated`` metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.fields import FieldInfo

from gemmaserve.errors import UsageError

R = TypeVar("R", bound="ActionRequest")


@dataclass(frozen=True)
class Cli:
    """How a field appears on the command line when the plain ``--field-name`` option is not enough.

    ``argument``: a positional argument instead of an option. ``short``: a one-letter alias (``-n``).
    ``aliases``: older long spellings still accepted. ``metavar``: the placeholder in ``--help``.
    ``flag_off``: for a boolean that defaults to true, the name of the switch that turns it off.
    ``unprocessed``: a list argument that takes the rest of the line as is (flags passed on to vLLM).
    ``cli_only``: why the setting exists on the command line only (it needs a person at a terminal, or it
    is an override an agent must not have); the MCP tool does not offer it, so the field keeps its default.
    """

    argument: bool = False
    short: str | None = None
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    flag_off: str | None = None
    unprocessed: bool = False
    cli_only: str | None = None


@dataclass(frozen=True)
class Effect:
    """What an action does to the world, in the four words of MCP's tool hints (an agent's client shows them
    or auto-approves on them). ``reads_only``: changes nothing. ``destroys``: may end, replace or delete
    something that was there. ``repeatable``: a second identical call changes nothing more. ``remote``:
    talks to AWS, the model hub or an endpoint."""

    name: str
    reads_only: bool
    destroys: bool
    repeatable: bool
    remote: bool


# Each kind named once; a request class says which is its own (tests/unit/test_request_agreement.py).
READS = Effect("reads", reads_only=True, destroys=False, repeatable=True, remote=False)
READS_REMOTE = Effect("reads remote", reads_only=True, destroys=False, repeatable=True, remote=True)
# One chat request to a model: nothing changes, but a second call may answer otherwise.
ASKS_REMOTE = Effect("asks remote", reads_only=True, destroys=False, repeatable=False, remote=True)
# A new file or process; nothing that was there is replaced.
CREATES = Effect("creates", reads_only=False, destroys=False, repeatable=False, remote=False)
# Sends requests out and writes what they return, or creates billed AWS resources (endpoints, builds).
CREATES_REMOTE = Effect("creates remote", reads_only=False, destroys=False, repeatable=False, remote=True)
# Reads result files and (re)writes derived ones: repeating the call gives the same files.
DERIVES = Effect("derives", reads_only=False, destroys=False, repeatable=True, remote=False)
# Creates or updates AWS resources in place: repeating it converges to the same state.
CONVERGES_REMOTE = Effect("converges remote", reads_only=False, destroys=False, repeatable=True, remote=True)
# Ends a process here or edits a file in place (with a backup): a second call finds it done.
CHANGES_IN_PLACE = Effect("changes in place", reads_only=False, destroys=True, repeatable=True, remote=False)
# Deletes named AWS resources: a second call finds them gone.
DELETES_REMOTE = Effect("deletes remote", reads_only=False, destroys=True, repeatable=True, remote=True)
# Deletes whatever AWS resources match when it runs (expired endpoints): each call may find others.
PRUNES_REMOTE = Effect("prunes remote", reads_only=False, destroys=True, repeatable=False, remote=True)


class ActionRequest(BaseModel):
    """The base of every action's request: immutable, unknown fields rejected, no infinite or NaN number.

    A request names them in its class statement,
    ``class StopRequest(ActionRequest, action="serve stop", effect=CHANGES_IN_PLACE, confirmation=True)``:
    ``action`` is the command path; the MCP tool is the same words joined by ``_``. ``effect`` is what it does
    (the MCP tool's hints come from it); a class that names an action names its own effect, never its
    parent's. ``confirmation`` is true for actions that change or delete something a person should agree to
    first (a running server, a patched file, an IAM role, a billed endpoint or build): the CLI asks (or needs
    ``--yes``) and the MCP tool needs ``confirm=true``, except when the request is a dry run. Every action
    that destroys needs it.
    """

    # inf and nan are never a setting: a timeout of inf hangs, a TTL of inf has no expiry date, a NaN
    # compares false with every limit that should have stopped it.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    action: ClassVar[str]
    effect: ClassVar[Effect]
    confirmation: ClassVar[bool] = False

    def __init_subclass__(
        cls, *, action: str | None = None, effect: Effect | None = None, confirmation: bool | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init_subclass__(**kwargs)
        if action is not None:
            if effect is None:
                raise TypeError(f"{cls.__name__} names action {action!r} but not its effect")
            cls.action = action
        if effect is not None:
            cls.effect = effect
        if confirmation is not None:
            cls.confirmation = confirmation

    def is_dry_run(self) -> bool:
        return bool(getattr(self, "dry_run", False))

    def needs_confirmation(self) -> bool:
        return self.confirmation and not self.is_dry_run()

    def describe_change(self) -> str:
        """What a confirmation asks about, as a clause: ``stop the vLLM server on port 8000``."""
        return f"run {self.action}"

    @classmethod
    def parse(cls, values: dict[str, Any]) -> Self:
        """Validate ``values`` (from either front end) into a request; a bad value is a :class:`UsageError`."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise usage_error(cls, exc) from None


def field_label(name: str) -> str:
    return "--" + name.replace("_", "-")


def exclusive(request: BaseModel, first: str, second: str, why: str = "") -> None:
    """Refuse ``request`` when it sets both of two settings that exclude each other (a flag set is true, any
    other setting is not None), naming each as both front ends spell it; ``why`` says what each is for."""
    given = [getattr(request, name) for name in (first, second)]
    # identity, not equality: a setting of 0 is given (0 == False)
    if all(value is not None and value is not False for value in given):
        both = " or ".join(f"{field_label(name)} ({name})" for name in (first, second))
        raise ValueError(f"Give {both}, not both" + (f": {why}" if why else "."))


def usage_error(model: type[BaseModel], exc: ValidationError) -> UsageError:
    """One readable line per problem, naming the field as both front ends spell it."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        field = model.model_fields.get(str(error["loc"][0])) if error["loc"] else None
        positional = field is not None and cli_marker(field.metadata).argument
        flag = where.split(".")[0].upper() if positional else field_label(where)
        label = f"{flag} ({where})" if where else "the request"
        message = error["msg"].removeprefix("Value error, ")
        problems.append(f"{label}: {message}")
    first = problems[0] if problems else str(exc)
    hint = "; ".join(problems[1:]) or None
    allowed = ", ".join(
        name.upper() if cli_marker(field.metadata).argument else field_label(name)
        for name, field in model.model_fields.items()
    )
    if any(error["type"] == "extra_forbidden" for error in exc.errors()):
        hint = f"Known settings: {allowed}."
    return UsageError(first, hint=hint, problems=problems)


@dataclass(frozen=True)
class TokenCountMarker:
    """Marks a field whose value may be written as vLLM writes token counts (``32k``, ``32K``)."""


_TOKEN_SUFFIX_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_TOKEN_SUFFIX_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
TOKEN_COUNT_HELP = "Also 32k (32,000) or 32K (32,768), as vllm serve reads them."


def parse_token_count(value: object) -> object:
    """A token count as ``vllm serve`` reads one (``utils/argparse_utils.py:29`` ``human_readable_int``,
    vLLM 0.30.0): a lower-case suffix is decimal (``25.6k`` = 25,600), an upper-case one binary
    (``32K`` = 32,768, no decimals). Anything else is left for pydantic to judge (and refuse)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match is None:
        return int(text) if re.fullmatch(r"[+-]?\d+", text) else text
    number, suffix = match.groups()
    if suffix in _TOKEN_SUFFIX_DECIMAL:
        return int(float(number) * _TOKEN_SUFFIX_DECIMAL[suffix])
    if "." in number:
        raise ValueError(f"decimals are not allowed with the binary suffix {suffix}: did you mean {text.lower()}?")
    return int(number) * _TOKEN_SUFFIX_BINARY[suffix]


def token_count(*, optional: bool = False, **constraints: Any) -> tuple[Any, ...]:
    """The metadata of a token-count field: its bounds and help, ``32k``/``32K`` accepted from both front ends."""
    description = constraints.pop("description")
    minimum = constraints.get("ge", 1)
    nothing: list[dict[str, str]] = [{"type": "null"}] if optional else []
    if optional:
        constraints = {}  # the bounds sit on the inner int (pydantic applies them to the whole union otherwise)
    return (
        TokenCountMarker(),
        BeforeValidator(parse_token_count),
        WithJsonSchema(
            {
                "anyOf": [
                    {
                        "type": "integer",
                        "minimum": minimum,
                        **({"maximum": constraints["le"]} if "le" in constraints else {}),
                    },
                    {"type": "string", "pattern": r"^\s*\d+(\.\d+)?[kmgt]\s*$|^\s*\d+[KMGT]\s*$"},
                    *nothing,
                ]
            }
        ),
        Field(description=f"{description} {TOKEN_COUNT_HELP}", **constraints),
    )


# The serving terms that plan, doctor, serve start, preflight and deploy all take: one declaration, so a
# flag has the same name, default and range everywhere (and the plan they describe is the same plan).
MaxModelLen = Annotated[
    int, *token_count(ge=16, description="vLLM's --max-model-len: the context one request may use.")
]
GpuMemoryUtilization = Annotated[
    float,
    Field(ge=0.05, le=0.99, description="vLLM's --gpu-memory-utilization: the share of GPU memory it may take."),
]
MaxNumSeqs = Annotated[
    int | None,
    Field(ge=1, description="vLLM's --max-num-seqs (default: vLLM's, 256 below 70 GiB, else 1,024)."),
]
MaxNumBatchedTokens = Annotated[
    Annotated[int, Field(ge=16)] | None,
    *token_count(
        optional=True,
        ge=16,
        description="vLLM's --max-num-batched-tokens (default: vLLM's, 2,048 below 70 GiB, else 8,192).",
    ),
]
LanguageModelOnly = Annotated[
    bool, Field(description="vLLM's --language-model-only: text only, no vision/audio towers loaded or profiled.")
]
VllmVersion = Annotated[
    str | None,
    Cli(metavar="VERSION"),
    Field(
        description="The vLLM release whose rules to follow (0.26-0.34; default the newest, or the SageMaker "
        "image's for ml.* instances)."
    ),
]


def _whole_number_from_text(value: object) -> object:
    """``"4"`` from a command line is the number 4 (a choice of numbers arrives as its text)."""
    return int(value) if isinstance(value, str) and value.strip().isdigit() else value


TensorParallelSize = Annotated[
    Literal[1, 2, 4, 8] | None,
    BeforeValidator(_whole_number_from_text),
    Field(
        description="vLLM's --tensor-parallel-size: GPUs of one host the model is split over (default 1; the "
        "plan also offers the smallest that fits where one GPU does not)."
    ),
]
Port = Annotated[int, Field(ge=1, le=65535, description="The server's port.")]
DryRun = Annotated[bool, Field(description="Only say what would be done; change nothing (needs no confirmation).")]


class ServingSettings(BaseModel):
    """vLLM settings that decide what fits: embedded (by inheritance) in every request that plans."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_model_len: MaxModelLen = 8192
    gpu_memory_utilization: GpuMemoryUtilization = 0.9
    max_num_seqs: MaxNumSeqs = None
    max_num_batched_tokens: MaxNumBatchedTokens = None
    language_model_only: LanguageModelOnly = False
    vllm: VllmVersion = None
    tensor_parallel_size: TensorParallelSize = None

    def serving(self) -> ServingSettings:
        """Just the serving settings, to hand to a layer that plans."""
        return ServingSettings.model_construct(**{name: getattr(self, name) for name in ServingSettings.model_fields})


def ordered_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The model's fields, its own first and then those of shared blocks (as ``--help`` lists them)."""
    own = [name for klass in model.__mro__ for name in getattr(klass, "__annotations__", {})
           if klass is model or klass not in (ServingSettings, ActionRequest, BaseModel)]  # fmt: skip
    fields = model.model_fields
    first = [name for name in dict.fromkeys(own) if name in fields]
    return {name: fields[name] for name in [*first, *(name for name in fields if name not in first)]}


def mcp_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The fields an MCP tool offers: all but those marked ``cli_only``."""
    return {name: field for name, field in ordered_fields(model).items() if not cli_marker(field.metadata).cli_only}


def cli_marker(metadata: list[Any]) -> Cli:
    for item in metadata:
        if isinstance(item, Cli):
            return item
    return Cli()
