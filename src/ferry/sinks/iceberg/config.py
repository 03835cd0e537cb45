"""Options of the Iceberg sink, in the spelling of Flink CDC's Iceberg pipeline connector.

This module imports no pyiceberg, so a job file validates without the ``iceberg`` extra.

.. code-block:: yaml

    sink:
      type: iceberg
      catalog.properties.type: sql                      # default
      catalog.properties.warehouse: file:///data/lake   # default: ./var/warehouse
      catalog.properties.uri: sqlite:////data/lake/catalog.db   # default: <warehouse>/catalog.db
      table.properties.write.parquet.compression-codec: zstd
      partition.key: app.orders:day(created_at);app.items:region,bucket[8](id)
      namespace: default
      snapshot.retain: 100
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ferry.options import OptionError, TableFormatSinkConfigBase, local_dir

#: The warehouse when ``catalog.properties.warehouse`` is not set (relative to the working directory).
DEFAULT_WAREHOUSE = Path("var/warehouse")

#: Properties of every table the sink creates, unless ``table.properties.*`` sets them: merged
#: manifests and a bounded list of old metadata files keep commit latency and disk use flat;
#: upserts and deletes are merge-on-read (position delete files; ``copy-on-write`` rewrites the
#: data files that hold changed keys instead). A column's Parquet dictionary is given up once it
#: passes 64 KiB (Iceberg's default is 2 MiB): a column of few distinct values (a status, a
#: country) keeps its dictionary, and one of mostly distinct values (keys, timestamps, notes),
#: which a dictionary does not shrink, stops paying for it early (half the cost of writing a
#: commit's file, and a smaller file: ``bench/README.md``).
DEFAULT_TABLE_PROPERTIES: dict[str, str] = {
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
    "write.parquet.dict-size-bytes": "65536",
}


#: The table property naming the format of the data files writers write.
FILE_FORMAT_PROPERTY = "write.format.default"


#: Iceberg's ``io-impl`` (a Java FileIO class) → pyiceberg's FileIO for the same storage
#: (``py-io-impl``); None: pyiceberg's choice by each path's scheme, as Iceberg's ResolvingFileIO.
IO_IMPL, PY_IO_IMPL = "io-impl", "py-io-impl"
_ARROW_FILE_IO, _FSSPEC_FILE_IO = "pyiceberg.io.pyarrow.PyArrowFileIO", "pyiceberg.io.fsspec.FsspecFileIO"
JAVA_FILE_IO: dict[str, str | None] = {
    "org.apache.iceberg.aws.s3.S3FileIO": _ARROW_FILE_IO,
    "org.apache.iceberg.gcp.gcs.GCSFileIO": _ARROW_FILE_IO,
    "org.apache.iceberg.hadoop.HadoopFileIO": _ARROW_FILE_IO,
    "org.apache.iceberg.aliyun.oss.OSSFileIO": _ARROW_FILE_IO,
    "org.apache.iceberg.azure.adlsv2.ADLSFileIO": _FSSPEC_FILE_IO,
    "org.apache.iceberg.io.ResolvingFileIO": None,
}


#: A partition field of ``partition.key``: a column (identity), ``year|month|day|hour(column)``,
#: ``bucket[N](column)`` or ``truncate[W](column)``.
PARTITION_FIELD = re.compile(
    r"^(?:(?P<column>[^()\[\]]+)|(?P<time>year|month|day|hour)\((?P<time_column>[^()]+)\)"
    r"|(?P<sized>bucket|truncate)\[(?P<size>\d+)\]\((?P<sized_column>[^()]+)\))$"
)


class IcebergSinkConfig(TableFormatSinkConfigBase):
    """``catalog.properties.*`` go to pyiceberg's ``load_catalog``; ``partition.key`` names the
    partition fields (``db.t1:a,day(ts);db.t2:bucket[8](id)``)."""

    located_by = frozenset({"type", "warehouse", "uri"})

    type: Literal["iceberg"] = "iceberg"
    #: The name the catalog is opened under. A SQL catalog keys its rows by it: readers of the
    #: tables must open the catalog under the same name.
    catalog_name: str = Field(default="ferry", alias="catalog.name", min_length=1)
    #: The Iceberg namespace of tables whose id has no schema part.
    namespace: str = Field(default="default", min_length=1)
    #: Snapshots kept per table; the commit that goes past this expires the older ones.
    snapshot_retain: int = Field(default=100, ge=1, alias="snapshot.retain")
    #: Rewrite the small data files that commits leave behind into fewer files.
    compaction_enabled: bool = Field(default=True, alias="sink.compaction.enabled")
    #: Look for small files to compact every N commits of a table.
    compaction_commit_interval: int = Field(default=10, ge=1, alias="sink.compaction.commit-interval")
    #: Data files smaller than this are the ones compacted, and a compaction reads at most this
    #: much of their live rows ...
    compaction_small_file_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1, alias="sink.compaction.small-file-bytes"
    )
    #: ... once a table has at least this many of them in one size tier (tiers are sizes this
    #: factor apart: 64 KiB, 64 KiB × N, ...; the smallest such tier is rewritten into one file).
    compaction_min_files: int = Field(default=8, ge=2, alias="sink.compaction.min-input-files")
    #: Write a merge-on-read table's compacted files on a thread of their own while the pipeline
    #: reads on, and commit them at a later commit of the table (``false``: within the commit that
    #: finds them due, as copy-on-write tables always do).
    compaction_background: bool = Field(default=True, alias="sink.compaction.background")

    @field_validator("partition_keys")
    @classmethod
    def _partition_fields(cls, tables: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for table, fields in tables.items():
            for field in fields:
                match = PARTITION_FIELD.match(field)
                if match is None or match["size"] == "0":
                    raise ValueError(
                        f"partition.key: {field!r} of {table} is not a column, "
                        "year|month|day|hour(column), bucket[N](column) or truncate[W](column)"
                    )
        return tables

    @model_validator(mode="after")
    def _check_catalog(self) -> IcebergSinkConfig:
        props = self.catalog_properties
        if (
            props.get("type", "sql") == "sql"
            and "uri" not in props
            and local_dir(props.get("warehouse", str(DEFAULT_WAREHOUSE))) is None
        ):
            raise ValueError(
                "catalog.properties.uri is required when catalog.properties.warehouse is not a local "
                f"directory (it is {props.get('warehouse')!r})"
            )
        io_impl = props.get(IO_IMPL)
        if io_impl is not None and io_impl not in JAVA_FILE_IO and not io_impl.startswith("pyiceberg."):
            raise OptionError(
                f"{io_impl} is not a FileIO pyiceberg has: Iceberg's S3FileIO, GCSFileIO, "
                "HadoopFileIO, OSSFileIO, ADLSFileIO and ResolvingFileIO are, and so are pyiceberg's "
                "classes (pyiceberg.io.pyarrow.PyArrowFileIO, pyiceberg.io.fsspec.FsspecFileIO)",
                f"catalog.properties.{IO_IMPL}",
            )
        return self

    def resolved_catalog_properties(self) -> dict[str, str]:
        """The catalog properties with ferry's defaults: a SQLite catalog in a local warehouse."""
        props = dict(self.catalog_properties)
        props.setdefault("type", "sql")
        io_impl = props.pop(IO_IMPL, None)
        python_io = JAVA_FILE_IO.get(io_impl, io_impl) if io_impl is not None else None
        if python_io is not None:
            props.setdefault(PY_IO_IMPL, python_io)
        if "warehouse" not in props and props["type"] != "sql":
            return props
        local = local_dir(props.get("warehouse", str(DEFAULT_WAREHOUSE)))
        if local is not None:
            props["warehouse"] = local.as_uri()
            if props["type"] == "sql":
                props.setdefault("uri", f"sqlite:///{local}/catalog.db")
        return props

    def new_table_properties(self) -> dict[str, str]:
        """The properties a table the sink creates gets."""
        return {**DEFAULT_TABLE_PROPERTIES, **self.table_properties}

    def refused_table_option(self, key: str, value: str) -> str | None:
        """Iceberg table properties go to the table, except a file format pyiceberg does not write."""
        if key == FILE_FORMAT_PROPERTY and value.strip().lower() != "parquet":
            return f"pyiceberg writes Parquet data files only, not {value}"
        return None
