"""Options of the Hologres sink, in the spelling of Flink CDC's Hologres pipeline connector.

This module imports no driver, so a job file validates without the ``postgres`` extra.

.. code-block:: yaml

    sink:
      type: hologres
      endpoint: hgprecn-cn-xxx.hologres.aliyuncs.com:80
      dbname: ods
      username: ${HOLOGRES_USER}
      password: ${HOLOGRES_PASSWORD}
      sink.type-normalize-strategy: broaden   # standard (default) | broaden | only-bigint-or-text
      mutatetype: insertorupdate              # insertorignore | insertorreplace | insertorupdate (default)
      table_property.distribution_key: id     # Hologres-only: CALL set_table_property(...)
      table_property.orientation: column
      schema: public                          # tables whose id has no schema part go here
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ferry.options import SinkConfigBase, fold_prefixed
from ferry.sinks.hologres.types import TypeNormalizeStrategy

#: Hologres's port when ``endpoint`` names none.
DEFAULT_PORT = 80


class MutateType(StrEnum):
    """What a write does to a row whose primary key is already in the table (Hologres's Flink
    connector's ``mutatetype``)."""

    #: The row in the table stays as it is (``INSERT ... ON CONFLICT DO NOTHING``).
    INSERT_OR_IGNORE = "insertorignore"
    #: The whole row is replaced: columns the write has no value for become NULL.
    INSERT_OR_REPLACE = "insertorreplace"
    #: The written columns are updated; the table's other columns keep their values.
    INSERT_OR_UPDATE = "insertorupdate"


class HologresSinkConfig(SinkConfigBase):
    """Connection settings, the type-normalize strategy and ``table_property.*`` of new tables."""

    type: Literal["hologres"] = "hologres"
    #: ``host:port`` of the Hologres instance.
    endpoint: str = Field(min_length=1)
    dbname: str = Field(min_length=1)
    username: str = Field(min_length=1)
    password: SecretStr
    type_normalize_strategy: TypeNormalizeStrategy = Field(
        default=TypeNormalizeStrategy.STANDARD, alias="sink.type-normalize-strategy"
    )
    #: What a write does to a row whose key is already in the table.
    mutate_type: MutateType = Field(default=MutateType.INSERT_OR_UPDATE, alias="mutatetype")
    #: Hologres table properties of the tables the sink creates (``distribution_key``,
    #: ``clustering_key``, ``orientation`` ...), set with ``CALL set_table_property``.
    table_properties: dict[str, str] = Field(default_factory=dict)
    #: The schema of tables whose id has no schema part.
    target_schema: str = Field(default="public", alias="schema", min_length=1)
    #: Seconds to wait for a connection.
    connect_timeout: int = Field(default=30, ge=1, alias="connection.timeout")

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        return fold_prefixed(data, "table_property", "table_properties")

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if ":" in value and (not host or not port.isdigit()):
            raise ValueError("endpoint is written host:port")
        return value

    @property
    def host(self) -> str:
        host, sep, port = self.endpoint.rpartition(":")
        return host if sep and port.isdigit() else self.endpoint

    @property
    def port(self) -> int:
        _, sep, port = self.endpoint.rpartition(":")
        return int(port) if sep and port.isdigit() else DEFAULT_PORT
