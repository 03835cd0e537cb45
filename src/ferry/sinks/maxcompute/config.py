"""Options of the MaxCompute sink, in the spelling of Flink CDC's MaxCompute pipeline connector.

This module imports no pyodps, so a job file validates without the ``maxcompute`` extra.

.. code-block:: yaml

    sink:
      type: maxcompute
      endpoint: http://service.cn-hangzhou.maxcompute.aliyun.com/api
      project: ods
      access-id: ${MAXCOMPUTE_ACCESS_ID}
      access-key: ${MAXCOMPUTE_ACCESS_KEY}
      tunnel.endpoint: http://dt.cn-hangzhou.maxcompute.aliyun.com   # default: asked from the service
      buckets-num: 16               # write.bucket.num of the Delta tables the sink creates
      compress.algorithm: zlib      # of the rows sent through the Tunnel: zlib (default) or raw
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from ferry.options import SinkConfigBase


class MaxComputeSinkConfig(SinkConfigBase):
    """Where the project is, the credentials, and how new tables and uploads are shaped."""

    type: Literal["maxcompute"] = "maxcompute"
    #: The REST endpoint of the region, ``http(s)://service.<region>.maxcompute.aliyun.com/api``.
    endpoint: str = Field(min_length=1)
    project: str = Field(min_length=1)
    access_id: str = Field(alias="access-id", min_length=1)
    access_key: SecretStr = Field(alias="access-key")
    #: A temporary (STS) token to go with a temporary access id and key.
    sts_token: SecretStr | None = Field(default=None, alias="sts-token")
    #: The Tunnel endpoint; by default pyodps asks the service for the project's.
    tunnel_endpoint: str | None = Field(default=None, alias="tunnel.endpoint", min_length=1)
    #: The Tunnel quota (its name, not its nickname); by default the shared quota.
    quota_name: str | None = Field(default=None, alias="quota.name", min_length=1)
    #: ``write.bucket.num`` of the Delta tables (tables with a primary key) the sink creates.
    buckets_num: int = Field(default=16, ge=1, le=4096, alias="buckets-num")
    #: How rows are compressed on their way through the Tunnel.
    compress_algorithm: Literal["zlib", "raw"] = Field(default="zlib", alias="compress.algorithm")

    @field_validator("endpoint", "tunnel_endpoint")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("is written http(s)://host[:port][/path]")
        return value.rstrip("/") if value is not None else None
