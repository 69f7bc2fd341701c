"""``gemmaserve mcp`` as a process, with the two seams a real deploy needs and these machines lack.

Run as ``python -m tests.support.mcp.stdio_deploy_server``: it serves exactly as ``gemmaserve mcp`` does (the same
:func:`gemmaserve.mcp_server.stdio.serve`, signals and the session's end included), but Service Quotas
(which moto lacks) answer from botocore's Stubber and the Hub check says the model id is reachable.
AWS is whatever ``GEMMASERVE_AWS_ENDPOINT_URL`` points at (a test's moto server or its proxy).
"""

from __future__ import annotations

from gemmaserve.mcp_server import ServerDeps, build_server
from gemmaserve.mcp_server.stdio import serve
from gemmaserve.sagemaker.aws import Boto3ClientFactory
from gemmaserve.sagemaker.deployment.preflight import Reachability
from tests.support.mcp.fixtures import QuotaStubbedFactory

QUOTAS = {"ml.g4dn.xlarge for endpoint usage": 2.0}


def main() -> None:
    factory = QuotaStubbedFactory(Boto3ClientFactory(), QUOTAS)
    serve(build_server(ServerDeps(aws_clients=factory, check_model=lambda repo_id: Reachability.REACHABLE)))


if __name__ == "__main__":
    main()
