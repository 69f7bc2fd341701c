"""Service Quotas on 127.0.0.1, in front of moto's server (moto 5 has no ListServiceQuotas).

A real HTTP server speaking the service's JSON 1.1 wire format as botocore's service model describes it
(``X-Amz-Target: <targetPrefix>.ListServiceQuotas``, the body's ``ServiceCode``/``MaxResults``/``NextToken``,
the answer's ``Quotas`` and ``NextToken``; the prefix is read from botocore's model, not written here). It
answers ListServiceQuotas for ``sagemaker`` from the table a test gives, in pages of ``page_size`` so the
client's paginator is exercised; any other request goes to moto unchanged, so one endpoint URL serves every
client of a deploy (the CLI's ``GEMMASERVE_AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.sagemaker.moto_proxy import MotoFront, answer_with

ACCOUNT = "123456789012"


@functools.cache
def target_prefix() -> str:
    import botocore.loaders

    model = botocore.loaders.create_loader().load_service_model("service-quotas", "service-2")
    return str(model["metadata"]["targetPrefix"])


class ServiceQuotasFake(MotoFront):
    def __init__(self, moto_url: str, quotas: dict[str, float], *, page_size: int = 2, region: str = "us-east-1"):
        self.quotas = quotas
        self.page_size = page_size
        self.region = region
        self.requests: list[dict[str, Any]] = []  # the ListServiceQuotas bodies received
        super().__init__(moto_url, "service-quotas")

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        listing = handler.headers.get("X-Amz-Target", "") == f"{target_prefix()}.ListServiceQuotas"
        if handler.command == "POST" and listing:
            status, answer = self._list(json.loads(body or b"{}"))
            answer_with(handler, status, answer)
        else:
            super()._serve(handler, body)

    def _list(self, body: dict[str, Any]) -> tuple[int, bytes]:
        self.requests.append(body)
        if body.get("ServiceCode") != "sagemaker":
            error = {"__type": "NoSuchResourceException", "Message": f"No service {body.get('ServiceCode')!r}."}
            return 400, json.dumps(error).encode()
        start = int(body.get("NextToken") or 0)
        size = min(int(body.get("MaxResults") or self.page_size), self.page_size)
        names = list(self.quotas)
        page = names[start : start + size]
        quotas = [
            {
                "ServiceCode": "sagemaker",
                "ServiceName": "Amazon SageMaker",
                "QuotaArn": f"arn:aws:servicequotas:{self.region}:{ACCOUNT}:sagemaker/L-{index:08X}",
                "QuotaCode": f"L-{index:08X}",  # made up: real codes are opaque
                "QuotaName": name,
                "Value": self.quotas[name],
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
            }
            for index, name in enumerate(page, start=start)
        ]
        answer: dict[str, Any] = {"Quotas": quotas}
        if start + size < len(names):
            answer["NextToken"] = str(start + size)
        return 200, json.dumps(answer).encode()


@contextmanager
def service_quotas_fake(moto_url: str, quotas: dict[str, float], **options: Any) -> Iterator[ServiceQuotasFake]:
    fake = ServiceQuotasFake(moto_url, quotas, **options)
    try:
        yield fake
    finally:
        fake.close()
