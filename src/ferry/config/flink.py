"""What Flink CDC's job files say that ferry reads differently: the options that only tune Flink's
runtime (accepted, ignored, and named in a warning) and other spellings of sink types.

A Flink CDC pipeline file must run as written, so the keys Flink CDC documents are not refused as
unknown. Where a key has a meaning for ferry it is an option of the models in :mod:`ferry.config.job`
and the sinks' options models (both spellings, where ferry has its own). The keys here configure
what ferry does not have: Flink operators, subtasks, writer threads and buffers. ferry writes at
each checkpoint and splits work by Kafka partition, so these are accepted and ignored, and
``ferry validate`` names each with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping

_CHECKPOINT_WRITES = "ferry writes a table's rows at each checkpoint (pipeline.checkpoint.interval)"
_OPERATOR_UIDS = "Flink operator UIDs; ferry's state is keyed by the pipeline's name"
_SINGLE_WRITER = "a Flink sink writer's threads and metrics; each ferry worker writes with one client"

#: ``pipeline`` keys of Flink CDC that only tune Flink's runtime → why ferry ignores them.
PIPELINE_IGNORED: Mapping[str, str] = {
    "operator.uid.prefix": _OPERATOR_UIDS,
    "schema.operator.uid": _OPERATOR_UIDS,
    "sink.partitioning.strategy": (
        "how Flink spreads events over sink subtasks; ferry's workers split the source's Kafka partitions"
    ),
}

#: Per sink type, the keys of its Flink CDC connector that only tune Flink's writer → why ignored.
SINK_IGNORED: Mapping[str, Mapping[str, str]] = {
    "starrocks": {
        "sink.buffer-flush.max-bytes": _CHECKPOINT_WRITES,
        "sink.buffer-flush.interval-ms": _CHECKPOINT_WRITES,
        "sink.scan-frequency.ms": _CHECKPOINT_WRITES,
        "sink.wait-for-continue.timeout-ms": _SINGLE_WRITER,
        "sink.io.thread-count": _SINGLE_WRITER,
        "sink.metric.histogram-window-size": _SINGLE_WRITER,
        "sink.at-least-once.use-transaction-stream-load": (
            "ferry's Stream Load labels already make a retried batch load once"
        ),
        "sink.socket.timeout-ms": "ferry bounds Stream Load requests with sink.connect.timeout-ms",
        "unicode-char.max-bytes": "ferry sizes VARCHAR columns from the source's lengths",
    },
    "selectdb": {
        "benodes": "ferry loads rows through the frontends (fenodes), never directly to backends",
        "auto-redirect": "ferry's Stream Load follows the frontend's redirect",
        "charset-encoding": "ferry sends UTF-8",
        "sink.max-retries": "ferry retries under pipeline.restart-strategy",
        "sink.flush.queue-size": _CHECKPOINT_WRITES,
        "sink.buffer-flush.max-rows": _CHECKPOINT_WRITES,
        "sink.buffer-flush.max-bytes": _CHECKPOINT_WRITES,
        "sink.buffer-flush.interval": _CHECKPOINT_WRITES,
        "sink.ignore.update-before": "ferry writes the new row of an update, never its before-image",
        "sink.enable-delete": "ferry always deletes by key",
    },
    "iceberg": {
        "catalog.properties.glue.skip-name-validation": "pyiceberg's Glue catalog has no such check to skip",
    },
    "maxcompute": {
        "total.buffer-size": _CHECKPOINT_WRITES,
        "bucket.buffer-size": _CHECKPOINT_WRITES,
        "commit.thread-num": _SINGLE_WRITER,
        "flush.concurrent-num": _SINGLE_WRITER,
    },
}

#: Other names of sink types: Flink CDC's connector name → ferry's sink that speaks its protocol.
SINK_TYPE_SPELLINGS: Mapping[str, str] = {
    "doris": "selectdb",
    # Flink CDC's test sink, which keeps the events it is given: ferry's memory sink
    "values": "memory",
}


def ignored_keys(section: str, sink_type: str | None) -> Mapping[str, str]:
    """The ignored keys of a top-level section (``pipeline``, or ``sink`` of ``sink_type``)."""
    if section == "pipeline":
        return PIPELINE_IGNORED
    if section == "sink" and sink_type is not None:
        return SINK_IGNORED.get(SINK_TYPE_SPELLINGS.get(sink_type, sink_type), {})
    return {}


#: Per sink type, key prefixes of its Flink CDC connector that ferry refuses → why, and what to do.
SINK_REFUSED: Mapping[str, Mapping[str, str]] = {
    "iceberg": {
        "catalog.properties.catalog-impl": (
            "a Java catalog class, which pyiceberg cannot load; name the catalog with "
            "catalog.properties.type (sql, rest, glue, hive, dynamodb) or a Python class with "
            "catalog.properties.py-catalog-impl"
        ),
        "hadoop.conf.": (
            "hadoop.conf.* configures the Hadoop file systems of Iceberg's Java library, which pyiceberg "
            "does not use; give its FileIO the same settings as catalog.properties (s3.endpoint, "
            "s3.access-key-id, s3.path-style-access, hdfs.host, gcs.project-id, ...)"
        ),
    },
}


def refused_key(sink_type: str, key: str) -> str | None:
    """Why ferry refuses ``key`` of a sink of ``sink_type`` (Flink CDC's name or ferry's), or None."""
    refused = SINK_REFUSED.get(SINK_TYPE_SPELLINGS.get(sink_type, sink_type), {})
    return next((reason for prefix, reason in refused.items() if key.startswith(prefix)), None)
