"""Replays: a pipeline started from a timestamp, specific offsets or a savepoint, optionally
bounded, optionally rebuilding sink tables (dropped first, then recreated from the replayed events).

The start and end are resolved to offsets once, when the replay starts, so that its progress can
be shown as records done of records to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ferry.config.job import JobConfig
from ferry.control.exceptions import ControlError
from ferry.control.models import PartitionProgress, PipelineSpec, Progress, ProgressState
from ferry.logs import kafka_logger
from ferry.model.schema import TableId
from ferry.offsets import decode_offsets
from ferry.pipeline.catch_up import eta_seconds
from ferry.pipeline.checkpoints import Checkpoint
from ferry.pipeline.phase import Phase
from ferry.sinks.base import TableDropping
from ferry.sinks.base.registry import open_sink, sink_class


def drop_tables(job: JobConfig, tables: Iterable[str], pipeline: str) -> list[str]:
    """Drop the named sink tables; the replay recreates them. Returns the ones that existed."""
    sink = open_sink(job.sink, pipeline=pipeline)
    try:
        if not isinstance(sink, TableDropping):
            raise ControlError(
                400, f"spec.rebuildTables: the {sink.type} sink cannot drop tables for a rebuild"
            )
        return [name for name in tables if sink.drop_table(TableId.parse(name))]
    finally:
        sink.close()


def check_rebuild(job: JobConfig, spec: PipelineSpec) -> None:
    """Refuse at creation a rebuild the sink cannot do, and a rebuild without a start."""
    if not spec.rebuild_tables:
        return
    if not issubclass(sink_class(job.sink.type), TableDropping):
        raise ControlError(
            400, f"spec.rebuildTables: the {job.sink.type} sink cannot drop tables for a rebuild"
        )
    if spec.start_from is None:
        raise ControlError(400, "spec.rebuildTables needs spec.startFrom: where the rebuild reads from")
    for name in spec.rebuild_tables:
        try:
            TableId.parse(name)
        except ValueError as e:
            raise ControlError(400, f"spec.rebuildTables: {e}") from None


def offset_range(
    job: JobConfig, spec: PipelineSpec, checkpoint: Checkpoint | None
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Where a bounded replay starts and ends, per partition of the topics it reads by name."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    from ferry.connectors.kafka.source import offset_at  # noqa: PLC0415

    assert spec.bounded is not None
    consumer = Consumer(
        {"bootstrap.servers": job.source.bootstrap_servers, "group.id": "ferry-replay-range"},
        logger=kafka_logger(),
    )
    starts: dict[tuple[str, int], int] = {}
    ends: dict[tuple[str, int], int] = {}
    try:
        for topic in job.source.topic or ():
            metadata = consumer.list_topics(topic, timeout=10).topics[topic]
            for partition in sorted(metadata.partitions):
                tp = TopicPartition(topic, partition)
                low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                start = low
                start_from = spec.start_from
                if checkpoint is not None and (topic, partition) in checkpoint.offsets:
                    start = checkpoint.offsets[(topic, partition)]
                elif start_from is not None and start_from.timestamp_millis is not None:
                    found = offset_at(consumer, topic, partition, start_from.timestamp_millis)
                    start = high if found is None else found
                elif start_from is not None and start_from.offsets is not None:
                    start = start_from.offsets.get(topic, {}).get(partition, low)
                end = high
                if spec.bounded.mode == "timestamp":
                    assert spec.bounded.timestamp_millis is not None
                    found = offset_at(consumer, topic, partition, spec.bounded.timestamp_millis)
                    end = high if found is None else found
                elif spec.bounded.mode == "specific-offsets":
                    assert spec.bounded.offsets is not None
                    end = spec.bounded.offsets.get(partition, high)
                starts[(topic, partition)] = max(low, start)
                ends[(topic, partition)] = end
    finally:
        consumer.close()
    return starts, ends


#: A replay's state per phase of its pipeline (the other phases: reading, or about to).
_PROGRESS_STATES = {
    Phase.COMPLETED: ProgressState.COMPLETED,
    Phase.STOPPED: ProgressState.STOPPED,
    Phase.FAILED: ProgressState.FAILED,
}


def replay_progress(traits: Mapping[str, Any], phase: str, metrics: Mapping[str, Any]) -> Progress | None:
    """A bounded replay's progress: per partition and in all, the records read (offsets passed
    since its start offsets, as its runner last said in its status) of the records to read (from
    its start to its end offsets), and the ETA at its recent rate; None for another pipeline."""
    ends, starts = traits.get("endOffsets"), traits.get("startOffsets")
    if not ends or starts is None:
        return None
    position = decode_offsets(metrics.get("offsets") or {})
    start_of = decode_offsets(starts)
    partitions = []
    for (topic, partition), end in sorted(decode_offsets(ends).items()):
        start = start_of.get((topic, partition), 0)
        total = max(0, end - start)
        done = max(0, min(position.get((topic, partition), start), end) - start)
        partitions.append(
            PartitionProgress(
                topic=topic,
                partition=partition,
                records_done=done,
                records_total=total,
                percent=_percent(done, total),
            )
        )
    total = sum(p.records_total for p in partitions)
    done = sum(p.records_done for p in partitions)
    state = _PROGRESS_STATES.get(Phase(phase), ProgressState.READING)
    rate = metrics.get("rate_eps")
    eta = 0.0 if state is ProgressState.COMPLETED else eta_seconds(total - done, rate)
    return Progress(
        state=state,
        records_done=done,
        records_total=total,
        percent=_percent(done, total),
        records_read=int(metrics.get("records_read") or 0),
        rows_written=sum(int(n) for n in (metrics.get("rows_written") or {}).values()),
        partitions=partitions,
        rate_per_second=rate,
        eta_seconds=None if eta is None else round(eta, 1),
    )


def _percent(done: int, total: int) -> float:
    return 100.0 if total == 0 else round(100.0 * done / total, 1)
