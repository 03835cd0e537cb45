"""AWS Glue and S3 stood in for by moto's server: a local HTTP endpoint that speaks their wire
protocols (Glue's JSON over ``POST /`` with ``X-Amz-Target``, S3's REST API), so that pyiceberg's
Glue catalog and its S3 FileIO talk to it exactly as they talk to AWS.

::

    with AwsStandIn(bucket="my-bucket") as aws:
        ...  # catalog.properties: aws.catalog_properties()
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

from moto.server import ThreadedMotoServer

__all__ = ["AwsStandIn"]

#: Credentials the stand-in takes (moto accepts any; these are no account's).
ACCESS_KEY_ID = "ferry-test-access-key"
SECRET_ACCESS_KEY = "ferry-test-secret-key"


class AwsStandIn:
    """moto's server on a free local port, with ``bucket`` created in ``region``."""

    def __init__(self, *, bucket: str, region: str = "us-east-1") -> None:
        self.bucket = bucket
        self.region = region
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def __enter__(self) -> AwsStandIn:
        # werkzeug logs every request at INFO
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        try:
            self.client("s3").create_bucket(Bucket=self.bucket)
        except BaseException:
            self._server.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.stop()

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` at the stand-in."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )

    def catalog_properties(self) -> dict[str, str]:
        """pyiceberg's properties that point its Glue catalog and S3 FileIO here."""
        return {
            "glue.endpoint": self.endpoint,
            "s3.endpoint": self.endpoint,
            "s3.region": self.region,
            "client.access-key-id": ACCESS_KEY_ID,
            "client.secret-access-key": SECRET_ACCESS_KEY,
        }
