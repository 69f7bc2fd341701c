"""``gemmaserve sagemaker …``: parse arguments, call one function of :mod:`gemmaserve.sagemaker.api`, render.

Every command takes ``--region`` (or ``--regions`` where it can sweep or fall back)
and ``--json``. Destructive ones need ``--yes`` off a terminal; progress goes to stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from gemmaserve.cli.output import (
    emit,
    gpu_memory_utilization_option,
    json_option,
    max_model_len_option,
)
from gemmaserve.errors import ConfirmationRequired, UsageError

region_option = click.option("--region", help="AWS region (default: the AWS profile's, else us-east-1).")


def _region(region: str | None) -> str:
    from gemmaserve.sagemaker.clients import default_region

    return default_region(region)


def _regions(regions: str | None, region: str | None = None, *, sweep: bool = False) -> list[str]:
    from gemmaserve.sagemaker.inputs import commercial_regions, parse_regions

    if sweep:
        return list(commercial_regions())
    if regions:
        return parse_regions(regions)
    return [_region(region)]


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _confirm(action: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfirmationRequired(
            f"Refusing to {action[:1].lower() + action[1:]} without confirmation on a non-terminal.",
            hint="Add --yes.",
        )
    if not click.confirm(f"{action}?", err=True):
        raise click.exceptions.Abort()


def _env_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--env {pair!r} is not KEY=VALUE.", hint="For example: --env HF_TOKEN=hf_…")
        env[key] = value
    return env


@click.group(name="sagemaker")
def cli() -> None:
    """SageMaker endpoints that cannot leak money, and the derived T4 image."""


def _deployment_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option("--model", required=True, help="Catalog model, e.g. gemma-4-e2b."),
            click.option("--encoding", default="qat-w4a16", show_default=True, help="bf16, qat-w4a16, …"),
            click.option(
                "--instance",
                "instances",
                required=True,
                multiple=True,
                help="Instance type; repeat for an InstancePools fallback (same GPU, priority order).",
            ),
            click.option(
                "--image", help="Container image URI ({region} is filled in). Default: the pinned AWS vLLM image."
            ),
            click.option("--role-arn", help="Execution role (create one: gemmaserve sagemaker role create)."),
            click.option(
                "--ami", default=None, help="InferenceAmiVersion (default al2023-ami-sagemaker-inference-gpu-4-1)."
            ),
            click.option(
                "--language-model-only",
                is_flag=True,
                help="Text only: vLLM's --language-model-only (SM_VLLM_LANGUAGE_MODEL_ONLY=true) skips the "
                "vision and audio towers.",
            ),
            max_model_len_option,
            gpu_memory_utilization_option,
        ]
    ):
        func = option(func)
    return func


@cli.command()
@_deployment_options
@click.option("--regions", help="Comma-separated candidate regions (default: --region).")
@region_option
@json_option
def preflight(
    model: str,
    encoding: str,
    instances: tuple[str, ...],
    image: str | None,
    role_arn: str | None,
    ami: str | None,
    language_model_only: bool,
    max_model_len: int,
    gpu_memory_utilization: float,
    regions: str | None,
    region: str | None,
    as_json: bool,
) -> None:
    """Will this deploy work? Quota, memory fit, CUDA vs AMI, Turing clamp, role, model id — each with its fix."""
    from gemmaserve.sagemaker import api
    from gemmaserve.sagemaker.container import DEFAULT_AMI

    report = api.preflight(
        model,
        encoding,
        list(instances),
        regions=_regions(regions, region),
        image_uri=image,
        role_arn=role_arn,
        inference_ami_version=ami or DEFAULT_AMI,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        language_model_only=language_model_only,
    )
    emit(report, as_json=as_json, render=_render_preflight)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _render_preflight(report: Any) -> None:
    click.echo(
        f"Preflight {report.model}/{report.encoding} on {', '.join(report.instance_types)} "
        f"in {', '.join(report.regions)} with {report.image_uri}"
    )
    _render_findings(report)
    click.echo("Result: " + ("ready to deploy" if report.ok else "not ready (fail or unknown above)"))


def _render_findings(report: Any) -> None:
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "unknown": "?   "}
    for finding in report.findings:
        click.echo(f"  {marks[finding.status.value]} {finding.check}: {finding.detail}")
        if finding.fix and finding.status.value != "ok":
            click.echo(f"       fix: {finding.fix}")


@cli.command()
@_deployment_options
@click.option("--name", "endpoint_name", help="Endpoint name (default: <model>-<gpu>).")
@click.option("--regions", help="Comma-separated regions to try in order when capacity or quota is short.")
@region_option
@click.option(
    "--ttl-hours",
    type=click.FloatRange(min=0, min_open=True),
    default=4.0,
    show_default=True,
    help="After this, `cleanup --expired` deletes it.",
)
@click.option("--keep", is_flag=True, help="Never expire, and keep what was created if the deploy is interrupted.")
@click.option("--owner", help="The gemmaserve:owner tag (default: your user name, made tag-safe).")
@click.option(
    "--vllm-arg", "vllm_args", multiple=True, help="Extra vllm serve flag tokens, e.g. --vllm-arg=--enforce-eager."
)
@click.option("--env", "env_pairs", multiple=True, help="Extra container environment KEY=VALUE (e.g. HF_TOKEN=…).")
@click.option("--max-num-seqs", type=click.IntRange(min=1))
@click.option("--startup-timeout-s", type=click.IntRange(60, 3600), default=1800, show_default=True)
@click.option("--download-timeout-s", type=click.IntRange(60, 3600), default=1800, show_default=True)
@click.option("--timeout-s", type=click.FloatRange(min=60), default=3600, show_default=True, help="Wait bound.")
@click.option("--no-wait", is_flag=True, help="Return once the endpoint is being created.")
@click.option("--skip-preflight", is_flag=True)
@click.option("--accept-unknown", is_flag=True, help="Deploy even when preflight could not check something.")
@click.option("--list-prices", is_flag=True, help="Use the catalog's dated list prices, not the Pricing API.")
@click.option("--dry-run", is_flag=True, help="Print the planned AWS calls and $/hour; create nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
def deploy(
    model: str,
    encoding: str,
    instances: tuple[str, ...],
    image: str | None,
    role_arn: str | None,
    ami: str | None,
    language_model_only: bool,
    max_model_len: int,
    gpu_memory_utilization: float,
    endpoint_name: str | None,
    regions: str | None,
    region: str | None,
    ttl_hours: float,
    keep: bool,
    owner: str | None,
    vllm_args: tuple[str, ...],
    env_pairs: tuple[str, ...],
    max_num_seqs: int | None,
    startup_timeout_s: int,
    download_timeout_s: int,
    timeout_s: float,
    no_wait: bool,
    skip_preflight: bool,
    accept_unknown: bool,
    list_prices: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Create Model → EndpointConfig → Endpoint (tagged, with TTL) and wait for InService."""
    from gemmaserve.sagemaker import api
    from gemmaserve.sagemaker.container import DEFAULT_AMI

    if not role_arn and not dry_run:
        raise UsageError("deploy needs --role-arn.", hint="Create one: gemmaserve sagemaker role create")
    if regions and region:
        raise UsageError("Give --region or --regions, not both.", hint="--regions a,b tries a first, then b.")
    kwargs = {
        "owner": owner,
        "language_model_only": language_model_only,
        "regions": _regions(regions, region),
        "role_arn": role_arn or "arn:aws:iam::000000000000:role/DRY-RUN",
        "endpoint_name": endpoint_name,
        "image_uri": image,
        "ttl_hours": None if keep else ttl_hours,
        "keep": keep,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_num_seqs": max_num_seqs,
        "vllm_args": list(vllm_args) or None,
        "env": _env_pairs(env_pairs),
        "inference_ami_version": ami or DEFAULT_AMI,
        "startup_timeout_s": startup_timeout_s,
        "download_timeout_s": download_timeout_s,
        "timeout_s": timeout_s,
        "wait": not no_wait,
        "skip_preflight": skip_preflight,
        "accept_unknown": accept_unknown,
        "progress": _progress,
        "live_prices": not list_prices,
    }
    if not dry_run:
        plan = api.deploy(model, encoding, list(instances), dry_run=True, **kwargs).plan  # type: ignore[arg-type]
        price = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
        if plan.price_range is not None:
            price = _usd_range(plan.price_range)
        _confirm(f"Create endpoint {plan.endpoint_name} in {plan.region} at {price}", yes)
    outcome = api.deploy(model, encoding, list(instances), dry_run=dry_run, **kwargs)  # type: ignore[arg-type]
    emit(outcome, as_json=as_json, render=_render_deploy)
    if outcome.dry_run and outcome.preflight is not None and outcome.preflight.failures(accept_unknown=True):
        click.echo("A deploy with these settings would be refused by preflight (FAIL above).", err=True)
        raise click.exceptions.Exit(1)


def _usd_range(price_range: Any) -> str:
    text = f"${price_range.low_usd_per_hour:.3f}–{price_range.high_usd_per_hour:.3f}/hour"
    if price_range.unpriced:
        text += f" (price unknown for {', '.join(price_range.unpriced)})"
    return text


def _render_deploy(outcome: Any) -> None:
    plan = outcome.plan
    price = "price unknown"
    if plan.price_range is not None:
        price = _usd_range(plan.price_range) + " depending on the type SageMaker places"
    elif plan.price:
        estimated = ", estimated" if plan.price.estimated else ""
        price = f"${plan.usd_per_hour:.3f}/hour ({plan.price.source}, {plan.price.date}{estimated})"
    where = (
        plan.instance_types[0]
        if len(plan.instance_types) == 1
        else "an instance pool of " + " > ".join(plan.instance_types)
    )
    click.echo(f"Endpoint {plan.endpoint_name} in {plan.region} on {where} at {price}")
    click.echo(f"Image: {plan.image_uri}")
    click.echo("The container will run: vllm serve " + " ".join(plan.masked_serve_args()))
    if outcome.dry_run:
        if outcome.preflight is not None:
            click.echo("Offline preflight (quota, role and model id are checked when deploying):")
            _render_findings(outcome.preflight)
        click.echo("Dry run — these calls would be made:")
        for call in plan.masked_calls():
            click.echo(f"  {call.service}:{call.operation} " + _short_params(call.params))
        click.echo(
            "Tags on each resource: "
            + ", ".join(f"{tag['Key']}={tag['Value']}" for tag in plan.calls[0].params.get("Tags", []))
        )
        return
    for attempt in outcome.attempts:
        click.echo(f"  {attempt.region}: {attempt.outcome} ({attempt.detail})")
    state = outcome.result.state if outcome.result else None
    if state is not None:
        click.echo(f"{state.endpoint_name}: {state.status.value} on {_placement(state)}")


def _placement(state: Any) -> str:
    """The placed type; for a pool with none placed yet (or not reported), the pool's types."""
    if state.instance_type and not state.pool_types:
        return str(state.instance_type)
    if state.instance_type:
        return f"{state.instance_type} (pool {', '.join(state.pool_types)})"
    return f"pool {', '.join(state.pool_types)} (placed type not reported yet)" if state.pool_types else "?"


def _short_params(params: dict[str, Any]) -> str:
    import json

    shown = {key: value for key, value in params.items() if key != "Tags"}
    return json.dumps(shown, sort_keys=True)


@cli.command()
@click.argument("endpoint_name")
@region_option
@json_option
def status(endpoint_name: str, region: str | None, as_json: bool) -> None:
    """Creating / InService / Failed / NotFound, placed instance type, image, elapsed time."""
    from gemmaserve.sagemaker import api

    state = api.status(endpoint_name, region=_region(region))
    emit(state, as_json=as_json, render=_render_state)


def _render_state(state: Any) -> None:
    click.echo(f"{state.endpoint_name} ({state.region}): {state.status.value}")
    price = None
    if state.usd_per_hour is not None:
        price = f"${state.usd_per_hour:.3f}/hour"
    elif state.price_range is not None:
        price = _usd_range(state.price_range)
    elif state.status.value != "NotFound":
        price = "price unknown"
    for label, value in (
        ("instance", state.instance_type),
        ("pool", ", ".join(state.pool_types) or None),
        ("price", price),
        ("image", state.resolved_image or state.image),
        ("elapsed", f"{state.elapsed_s / 60:.1f} min" if state.elapsed_s is not None else None),
        ("reason", state.failure_reason),
    ):
        if value:
            click.echo(f"  {label:<9}{value}")


@cli.command(name="wait")
@click.argument("endpoint_name")
@region_option
@click.option("--timeout-s", type=click.FloatRange(min=1), default=3600, show_default=True)
@click.option("--poll-s", type=click.FloatRange(min=1), default=30, show_default=True)
@json_option
def wait_command(endpoint_name: str, region: str | None, timeout_s: float, poll_s: float, as_json: bool) -> None:
    """Wait for InService; fail early on CannotStartContainerError, crashes, capacity waits and /ping stalls."""
    from gemmaserve.sagemaker import api

    state = api.wait(endpoint_name, region=_region(region), timeout_s=timeout_s, poll_s=poll_s, progress=_progress)
    emit(state, as_json=as_json, render=_render_state)


@cli.command()
@click.argument("endpoint_name")
@region_option
@click.option("--since-min", type=click.FloatRange(min=0, min_open=True), default=180, show_default=True)
@click.option("--contains", help="Only lines containing this text.")
@click.option("--grep", "pattern", help="Only lines matching this regular expression.")
@click.option("--tail", type=click.IntRange(min=0), default=200, show_default=True)
@json_option
def logs(
    endpoint_name: str,
    region: str | None,
    since_min: float,
    contains: str | None,
    pattern: str | None,
    tail: int,
    as_json: bool,
) -> None:
    """The endpoint's CloudWatch log, filtered, with the engine facts parsed from it."""
    from gemmaserve.sagemaker import api

    result = api.logs(
        endpoint_name, region=_region(region), since_s=since_min * 60, contains=contains, pattern=pattern, tail=tail
    )
    emit(result, as_json=as_json, render=_render_logs)


def _render_logs(result: Any) -> None:
    if not result.log_group_exists:
        click.echo(f"No log group {result.log_group} yet (capacity wait, or the container cannot start).", err=True)
    for line in result.lines:
        click.echo(f"{line.timestamp:%H:%M:%S} {line.message}")
    facts = {k: v for k, v in result.facts.model_dump(mode="json").items() if v not in (None, [], "not_started")}
    click.echo("Engine facts: " + (", ".join(f"{k}={v}" for k, v in facts.items()) or "none yet"), err=True)


@cli.command(name="invoke")
@click.argument("endpoint_name")
@click.argument("prompt")
@region_option
@click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--stream", is_flag=True, help="Stream through invoke_endpoint_with_response_stream.")
@json_option
def invoke_command(
    endpoint_name: str,
    prompt: str,
    region: str | None,
    max_tokens: int,
    temperature: float,
    stream: bool,
    as_json: bool,
) -> None:
    """One chat request (OpenAI body); --stream prints text as it arrives."""
    from gemmaserve.sagemaker import api

    if stream and as_json:
        raise UsageError(
            "--stream and --json cannot be combined: stdout carries either the text as it arrives "
            "or one JSON document at the end.",
            hint="Drop --stream for the JSON result, or --json.",
        )
    if stream:
        for text in api.invoke_chat_stream(
            endpoint_name, prompt, region=_region(region), max_tokens=max_tokens, temperature=temperature
        ):
            click.echo(text, nl=False)
        click.echo()
        return
    result = api.invoke_chat(
        endpoint_name, prompt, region=_region(region), max_tokens=max_tokens, temperature=temperature
    )
    emit(result, as_json=as_json, render=lambda r: click.echo(r.text))


@cli.command()
@click.argument("endpoint_name")
@region_option
@click.option(
    "--busy-timeout-s",
    type=click.FloatRange(min=0),
    default=1800,
    show_default=True,
    help="How long to wait while the endpoint is Creating/Updating.",
)
@click.option("--dry-run", is_flag=True)
@click.option("--force", is_flag=True, help="Also delete what gemmaserve did not create (no gemmaserve tags).")
@click.option("--yes", is_flag=True)
@json_option
def delete(
    endpoint_name: str, region: str | None, busy_timeout_s: float, dry_run: bool, force: bool, yes: bool, as_json: bool
) -> None:
    """Delete the endpoint, then its config, then its model(s). Missing pieces are fine.

    Refuses resources without gemmaserve's tags unless --force; never deletes a config or
    model another endpoint uses.
    """
    from gemmaserve.sagemaker import api

    if not dry_run:
        _confirm(f"Delete endpoint {endpoint_name} and its config and model", yes)
    report = api.delete(
        endpoint_name,
        region=_region(region),
        dry_run=dry_run,
        force=force,
        busy_timeout_s=busy_timeout_s,
        progress=_progress,
    )
    emit(report, as_json=as_json, render=_render_delete)


def _render_delete(report: Any) -> None:
    verb = "Would delete" if report.dry_run else "Deleted"
    click.echo(f"{verb}: {', '.join(report.deleted) or 'nothing'}")
    if report.absent:
        click.echo(f"Already absent: {', '.join(report.absent)}")
    if report.skipped:
        click.echo(f"Left in place: {', '.join(report.skipped)}")


@cli.command(name="list")
@click.option("--regions", help="Comma-separated regions.")
@click.option("--all-regions", is_flag=True, help="Sweep every region botocore lists for SageMaker.")
@region_option
@click.option("--list-prices", is_flag=True, help="Use the catalog's dated list prices, not the Pricing API.")
@json_option
def list_command(regions: str | None, all_regions: bool, region: str | None, list_prices: bool, as_json: bool) -> None:
    """Every endpoint gemmaserve created, with age, status and hourly cost, and leftover models and configs.

    Exits 1 when a region could not be read: an absence there proves nothing.
    """
    from gemmaserve.sagemaker import api

    inventory = api.list_endpoints(regions=_regions(regions, region, sweep=all_regions), live_prices=not list_prices)
    emit(inventory, as_json=as_json, render=_render_inventory)
    _fail_if_incomplete(inventory.errors)


def _fail_if_incomplete(errors: list[Any]) -> None:
    if errors:
        for error in errors:
            click.echo(f"Error: could not check {error.region}: {error.message}", err=True)
        click.echo(f"Incomplete: {len(errors)} region(s) could not be read; what they hold is unknown.", err=True)
        raise click.exceptions.Exit(1)


def _render_inventory(inventory: Any) -> None:
    click.echo(f"{'ENDPOINT':<32} {'REGION':<14} {'STATUS':<12} {'INSTANCE':<16} {'AGE':>7} {'$/H':>7} EXPIRES")
    for item in inventory.endpoints:
        age = f"{item.age_s / 3600:.1f}h" if item.age_s is not None else "?"
        usd = f"{item.usd_per_hour:.3f}" if item.usd_per_hour is not None else "unknown"
        if item.usd_per_hour is None and item.price_range is not None:
            usd = f"{item.price_range.low_usd_per_hour:.2f}-{item.price_range.high_usd_per_hour:.2f}"
        shown_type = item.instance_type or ("pool:" + "|".join(item.pool_types) if item.pool_types else "?")
        expires = "keep" if item.keep else (f"{item.expires_at:%Y-%m-%d %H:%M}Z" if item.expires_at else "?")
        if item.expired:
            expires += " EXPIRED"
        click.echo(
            f"{item.endpoint_name:<32} {item.region:<14} {item.status.value:<12} "
            f"{shown_type:<16} {age:>7} {usd:>7} {expires}"
        )
    bound = "at least " if inventory.total_is_lower_bound else ""
    why = []
    if inventory.unpriced:
        why.append(f"price unknown for {', '.join(inventory.unpriced)}")
    if inventory.errors:
        why.append(f"{len(inventory.errors)} region(s) unread")
    if len(inventory.errors) == len(inventory.regions):
        click.echo(f"Total: unknown (no region could be read: {', '.join(inventory.regions)})")
    else:
        click.echo(f"Total: {bound}${inventory.total_usd_per_hour:.3f}/hour" + (f" ({'; '.join(why)})" if why else ""))
    if inventory.orphans:
        click.echo("Leftovers with no endpoint (delete: gemmaserve sagemaker cleanup --orphans):")
        for orphan in inventory.orphans:
            click.echo(f"  {orphan.kind}:{orphan.name} ({orphan.region})")


@cli.command()
@click.option("--expired", is_flag=True, help="Delete our endpoints past their TTL.")
@click.option("--orphans", is_flag=True, help="Delete our models and endpoint configs that no endpoint uses.")
@click.option("--regions", help="Comma-separated regions.")
@click.option("--all-regions", is_flag=True, help="Sweep every region botocore lists for SageMaker.")
@region_option
@click.option("--dry-run", is_flag=True)
@click.option("--yes", is_flag=True)
@json_option
def cleanup(
    expired: bool,
    orphans: bool,
    regions: str | None,
    all_regions: bool,
    region: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete every endpoint of ours whose TTL has passed (--expired) and our leftovers (--orphans).

    Exits 1 when a region could not be read.
    """
    from gemmaserve.sagemaker import api

    if not expired and not orphans:
        raise UsageError("cleanup needs --expired, --orphans or both.", hint="gemmaserve sagemaker cleanup --expired")
    chosen = _regions(regions, region, sweep=all_regions)
    if not dry_run:
        what = " and ".join(x for x, on in (("expired endpoint", expired), ("orphaned model/config", orphans)) if on)
        _confirm(f"Delete every {what} of gemmaserve in {', '.join(chosen)}", yes)
    report = api.cleanup(regions=chosen, dry_run=dry_run, expired=expired, orphans=orphans)
    emit(report, as_json=as_json, render=_render_cleanup)
    _fail_if_incomplete(report.errors)


def _render_cleanup(report: Any) -> None:
    click.echo(
        ("Would delete" if report.dry_run else "Expired")
        + ": "
        + (", ".join(f"{e.endpoint_name} ({e.region})" for e in report.expired) or "none")
    )
    if report.orphans:
        click.echo(
            ("Would delete" if report.dry_run else "Orphans")
            + ": "
            + ", ".join(f"{o.kind}:{o.name} ({o.region})" for o in report.orphans)
        )
    for deleted in report.deleted:
        click.echo(
            f"Deleted {', '.join(deleted.deleted) or 'nothing'}"
            + (f"; left in place: {', '.join(deleted.skipped)}" if deleted.skipped else "")
        )


@cli.command()
@click.argument("endpoint_name")
@region_option
@click.option("--min", "min_instances", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--max", "max_instances", type=click.IntRange(min=1), required=True)
@click.option(
    "--target-invocations",
    type=click.FloatRange(min=0, min_open=True),
    required=True,
    help="Target invocations per instance per minute (SageMakerVariantInvocationsPerInstance).",
)
@click.option("--scale-in-cooldown-s", type=click.IntRange(min=0), default=300, show_default=True)
@click.option("--scale-out-cooldown-s", type=click.IntRange(min=0), default=60, show_default=True)
@click.option("--dry-run", is_flag=True)
@json_option
def autoscale(
    endpoint_name: str,
    region: str | None,
    min_instances: int,
    max_instances: int,
    target_invocations: float,
    scale_in_cooldown_s: int,
    scale_out_cooldown_s: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Register the endpoint's variant with Application Auto Scaling (target tracking)."""
    from gemmaserve.sagemaker import api

    result = api.autoscale(
        endpoint_name,
        region=_region(region),
        min_instances=min_instances,
        max_instances=max_instances,
        target_invocations_per_instance=target_invocations,
        scale_in_cooldown_s=scale_in_cooldown_s,
        scale_out_cooldown_s=scale_out_cooldown_s,
        dry_run=dry_run,
    )
    emit(
        result,
        as_json=as_json,
        render=lambda r: click.echo(
            f"{'Would register' if r.dry_run else 'Registered'} {r.resource_id}: {r.min_instances}–{r.max_instances} "
            f"instances, target {r.target_invocations_per_instance:g} invocations/instance/min ({r.policy_name})"
        ),
    )


@cli.command()
@region_option
@click.option("--filter", "name_filter", default="gemma", show_default=True, help="NameContains for the hub search.")
@json_option
def jumpstart(region: str | None, name_filter: str, as_json: bool) -> None:
    """The public JumpStart hub's Gemma 4 entries and the instance types each supports."""
    from gemmaserve.sagemaker import api

    listing = api.jumpstart(region=_region(region), name_filter=name_filter)

    def render(result: Any) -> None:
        if not result.models:
            click.echo(f"No Gemma 4 entries in {result.hub} ({result.region}).")
        for model in result.models:
            click.echo(f"{model.hub_content_name} {model.version or ''} (default {model.default_instance_type})")
            click.echo(f"  instances: {', '.join(model.supported_instance_types) or 'not listed'}")

    emit(listing, as_json=as_json, render=render)


@cli.group()
def role() -> None:
    """The least-privilege endpoint execution role."""


@role.command(name="create")
@region_option
@click.option(
    "--regions",
    help="Comma-separated regions the role must work in (deploy --regions fallbacks); "
    "regions it already serves are kept.",
)
@click.option("--name", "role_name", default="gemmaserve-endpoint", show_default=True)
@click.option("--image", "images", multiple=True, help="Image URIs the role may pull (default: the pinned AWS image).")
@click.option("--model-s3", help="s3://bucket/prefix the endpoint may read model files from.")
@click.option("--dry-run", is_flag=True)
@json_option
def role_create(
    region: str | None,
    regions: str | None,
    role_name: str,
    images: tuple[str, ...],
    model_s3: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Create (or update) the execution role and print the policy it carries."""
    import json

    from gemmaserve.sagemaker import api

    chosen = _regions(regions, region)
    result = api.create_execution_role(
        region=chosen[0],
        regions=chosen,
        role_name=role_name,
        image_uris=list(images),
        s3_model_uri=model_s3,
        dry_run=dry_run,
    )

    def render(r: Any) -> None:
        verb = (
            ("Would create" if r.created else "Would update") if r.dry_run else ("Created" if r.created else "Updated")
        )
        click.echo(f"{verb} role {r.role_name} {r.role_arn or ''} with inline policy {r.policy_name}:")
        click.echo(json.dumps(r.policy, indent=2))

    emit(result, as_json=as_json, render=render)


@cli.group()
def image() -> None:
    """The derived T4 image: the pinned AWS vLLM image plus the Turing clamp, built in CodeBuild."""


@image.command(name="render")
@region_option
@click.option("--account", default="ACCOUNT", show_default=True, help="Account of the target ECR repository.")
@click.option("--base-image", help="Base image (default: the pinned AWS vLLM SageMaker image of the region).")
@click.option(
    "--requirement",
    help="pip requirement for gemmaserve (default: a wheel built from this checkout; "
    "gemmaserve is not on the package index).",
)
@click.option("--buildspec", "show_buildspec", is_flag=True, help="Print the buildspec instead of the Dockerfile.")
@json_option
def image_render(
    region: str | None,
    account: str,
    base_image: str | None,
    requirement: str | None,
    show_buildspec: bool,
    as_json: bool,
) -> None:
    """Print the Dockerfile (or the CodeBuild buildspec); offline."""
    from gemmaserve.sagemaker import api

    plan = api.image_render(region=_region(region), account=account, base_image=base_image, requirement=requirement)
    emit(plan, as_json=as_json, render=lambda p: click.echo(p.buildspec if show_buildspec else p.dockerfile, nl=False))


@image.command(name="build")
@region_option
@click.option("--base-image", help="Base image (default: the pinned AWS vLLM SageMaker image of the region).")
@click.option("--requirement", help="pip requirement for gemmaserve instead of a wheel of this checkout.")
@click.option(
    "--wheel",
    "wheel_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A gemmaserve wheel to install (default: built now from this checkout).",
)
@click.option("--no-follow", is_flag=True, help="Return once the build has started.")
@click.option("--timeout-s", type=click.FloatRange(min=60), default=5400, show_default=True)
@click.option("--dry-run", is_flag=True, help="Show the role, policy and target image; create nothing.")
@click.option("--yes", is_flag=True)
@json_option
def image_build(
    region: str | None,
    base_image: str | None,
    requirement: str | None,
    wheel_path: str | None,
    no_follow: bool,
    timeout_s: float,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Create the ECR repository, CodeBuild project and role (idempotent), build, push, follow."""
    from gemmaserve.sagemaker import api

    chosen = _region(region)
    if not dry_run:
        _confirm(f"Create/update the CodeBuild project and run a build in {chosen} (billed per build minute)", yes)
    if wheel_path and requirement:
        raise UsageError("Give --wheel or --requirement, not both.")
    result = api.image_build(
        region=chosen,
        base_image=base_image,
        requirement=requirement,
        wheel_path=wheel_path,
        dry_run=dry_run,
        follow=not no_follow,
        timeout_s=timeout_s,
        progress=_progress,
    )

    def render(r: Any) -> None:
        click.echo(
            f"Base image: {r.plan.base_image} (vLLM {r.plan.base_vllm_version or 'checked in the build'}, "
            f"CUDA {r.plan.base_cuda_version or '?'})"
        )
        click.echo(f"gemmaserve from: {r.plan.gemmaserve_source}")
        click.echo(f"Target image: {r.plan.target_image}")
        click.echo(f"Build: {r.build_id or '(dry run)'} {r.status or ''}")
        if r.image_uri:
            click.echo(f"Deploy with: gemmaserve sagemaker deploy --image {r.image_uri} …")

    emit(result, as_json=as_json, render=render)
