"""Two workers of one consumer group on a real broker: whether a worker reads every partition of
its topics (``KafkaSource.reads_alone``, which allows the table barrier) follows the group's
assignment as workers join and leave."""

from __future__ import annotations

import pytest

from ferry.connectors.kafka.source import KafkaSource
from ferry.local.kafka_broker import TopicFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

#: Seconds a rebalance may take (the broker delays a new group's first one by 3 s).
REBALANCE_S = 60.0


def _holding(sources: dict[str, KafkaSource], counts: dict[str, int]) -> bool:
    """Each source polled once (a rebalance goes on only while its members poll); whether each now
    holds ``counts[name]`` partitions."""
    for source in sources.values():
        source.poll(100, 0.1)
    return all(len(sources[name].assigned) == count for name, count in counts.items())


def test_a_worker_reads_alone_only_while_no_other_worker_of_its_group_holds_a_partition(
    kafka_bootstrap: str, topic_factory: TopicFactory, group_id: str
) -> None:
    topic = topic_factory(partitions=2)
    first = KafkaSource(bootstrap_servers=kafka_bootstrap, group_id=group_id, topics=[topic])
    second = KafkaSource(bootstrap_servers=kafka_bootstrap, group_id=group_id, topics=[topic])
    try:
        first.open({})
        wait_for(
            lambda: _holding({"first": first}, {"first": 2}),
            REBALANCE_S,
            lambda: f"the first worker holds {first.assigned}",
        )
        assert first.reads_alone()

        second.open({})
        both = {"first": first, "second": second}
        wait_for(
            lambda: _holding(both, {"first": 1, "second": 1}),
            REBALANCE_S,
            lambda: f"assigned: first {first.assigned}, second {second.assigned}",
        )
        assert not first.reads_alone()
        assert not second.reads_alone()

        second.close()  # leaves the group: its partition goes back to the first
        wait_for(
            lambda: _holding({"first": first}, {"first": 2}),
            REBALANCE_S,
            lambda: f"the first worker holds {first.assigned}",
        )
        assert first.reads_alone()
    finally:
        second.close()
        first.close()
