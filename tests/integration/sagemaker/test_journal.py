"""The deploy journal: each Create is written down before it is sent and marked when its fate is known; a run
killed where no handler runs (SIGKILL) leaves entries that `list` shows and `cleanup --journal` settles.

The killed run is a real `gemmaserve sagemaker deploy` process against moto's server behind
:class:`~tests.support.sagemaker.moto_proxy.SageMakerProxy` (its endpoint stays Creating, so the run is waiting).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gemmaserve.errors import DeployInterrupted
from gemmaserve.sagemaker.operations.teardown import EntryState, Journal
from gemmaserve.state import state_dir
from tests.integration.sagemaker.test_interrupts import REGION, _ctrl_c, _deploy, _interrupt_at, _leftovers
from tests.support.sagemaker.helpers import Lines, make_role, run
from tests.support.sagemaker.moto_proxy import SageMakerProxy, sagemaker_proxy


def _states(name: str) -> dict[str, str]:
    return {entry.kind: entry.state.value for entry in Journal().entries() if entry.name.startswith(name)}


def test_each_create_is_journaled_before_it_is_sent_and_done_after(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    seen: list[dict[str, str]] = []

    def look(**_: Any) -> None:
        seen.append(_states("intr-e2b"))

    sm.meta.events.register("before-send.sagemaker.CreateEndpoint", look)
    _deploy(moto_factory, Lines())
    assert seen == [{"model": "sent", "endpoint-config": "sent", "endpoint": "sent"}]
    assert _states("intr-e2b") == {"model": "done", "endpoint-config": "done", "endpoint": "done"}
    entry = next(e for e in Journal().entries() if e.kind == "endpoint")
    assert entry.owner and entry.created_tag and entry.region == REGION and entry.pid == os.getpid()


def test_a_torn_down_deploy_closes_its_entries(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    _interrupt_at(sm, "after-call.sagemaker.CreateEndpoint", _ctrl_c)
    with pytest.raises(DeployInterrupted):
        _deploy(moto_factory, Lines())
    assert _states("intr-e2b") == {"model": "deleted", "endpoint-config": "deleted", "endpoint": "deleted"}
    assert Journal().open_entries() == []


@pytest.fixture
def proxy(moto_server_url: str, moto_factory: Any) -> Iterator[SageMakerProxy]:
    with sagemaker_proxy(moto_server_url) as proxy:
        yield proxy


def test_a_killed_deploy_is_shown_by_list_and_settled_by_cleanup_journal(
    proxy: SageMakerProxy, moto_factory: Any, aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "killed-e2b"
    role = make_role(moto_factory("iam", REGION))
    proxy.creating(name)
    env = {
        **os.environ,
        "GEMMASERVE_STATE_DIR": str(state_dir()),
        "GEMMASERVE_AWS_ENDPOINT_URL": proxy.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    deploy = subprocess.Popen(
        [sys.executable, "-m", "gemmaserve", "sagemaker", "deploy", "--model", "gemma-4-e2b", "--instance",
         "ml.g4dn.xlarge", "--role-arn", role, "--name", name, "--region", REGION, "--skip-preflight",
         "--list-prices", "--owner", "ana", "--yes"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # No deadline: a deploy that never reaches its wait is ended by the suite's timeout.
        while proxy.count("DescribeEndpoint") < 2:  # the wait has polled: every Create was made
            assert deploy.poll() is None, "the deploy ended before it reached its wait"
            time.sleep(0.05)
        deploy.send_signal(signal.SIGKILL)  # no handler runs: nothing is torn down
        deploy.wait(timeout=30)
    finally:
        if deploy.poll() is None:
            deploy.kill()
    proxy.finish_creating(name)
    assert _leftovers(moto_factory("sagemaker", REGION))["endpoints"] == [name]

    code, out, err = run(["sagemaker", "list", "--region", REGION, "--list-prices"], capsys)
    assert code == 0, err
    assert "settle: gemmaserve sagemaker cleanup --journal" in out
    for key in (f"endpoint:{name}", f"endpoint-config:{name}-config", f"model:{name}-model"):
        assert f"  {key} ({REGION}, ana, sent " in out and "its process is gone" in out, out

    code, out, err = run(
        ["sagemaker", "cleanup", "--journal", "--region", REGION, "--dry-run", "--list-prices", "--json"], capsys
    )
    assert code == 0 and {i["verdict"] for i in json.loads(out)["items"]} == {"would delete"}, out
    code, out, err = run(
        ["sagemaker", "cleanup", "--journal", "--region", REGION, "--yes", "--list-prices", "--json"], capsys
    )
    assert code == 0, err
    assert [(i["kind"], i["verdict"]) for i in json.loads(out)["items"]] == [
        ("endpoint", "deleted"),
        ("endpoint-config", "deleted"),
        ("model", "deleted"),
    ]
    assert _leftovers(moto_factory("sagemaker", REGION)) == {"endpoints": [], "configs": [], "models": []}
    assert Journal().open_entries() == []
    code, out, _ = run(
        ["sagemaker", "cleanup", "--journal", "--region", REGION, "--yes", "--list-prices", "--json"], capsys
    )
    assert code == 0 and json.loads(out)["items"] == []  # settled once, for good


def test_cleanup_journal_closes_what_is_gone_and_leaves_a_later_runs_resource(
    moto_factory: Any, aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = Journal()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = journal.sending(
        region=REGION, kind="model", name="gone-model", owner="ana", created_tag="2026-01-01T00:00:00Z"
    )
    taken = journal.sending(
        region=REGION, kind="endpoint", name="intr-e2b", owner="ana", created_tag="1999-01-01T00:00:00Z"
    )
    # entries of a process that has exited (its pid, now free)
    document = json.loads(journal.path.read_text())
    for item in document["entries"]:
        item["pid"] = int(dead.stdout)
    journal.path.write_text(json.dumps(document))
    _deploy(moto_factory, Lines())  # a later run made intr-e2b, with its own created-at tag
    code, out, err = run(
        ["sagemaker", "cleanup", "--journal", "--region", REGION, "--yes", "--list-prices", "--json"], capsys
    )
    assert code == 0, err
    verdicts = {i["name"]: i["verdict"] for i in json.loads(out)["items"]}
    assert verdicts == {"gone-model": "already absent", "intr-e2b": "another run's"}
    assert _leftovers(moto_factory("sagemaker", REGION))["endpoints"] == ["intr-e2b"]
    states = {entry.id: entry.state for entry in journal.entries()}
    assert states[gone] is EntryState.ABSENT and states[taken] is EntryState.ABSENT
