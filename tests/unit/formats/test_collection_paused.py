"""The cyclic garbage collector is paused while a batch is decoded, and resumed after it."""

from __future__ import annotations

import gc
import threading

import pytest
from format_fixtures import records

from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.record import Record
from ferry.pipeline.collector import collection_paused


def test_the_collector_is_paused_inside_and_resumed_after_even_on_an_error() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_resumes_when_the_last_of_several_threads_is_done() -> None:
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with collection_paused():
            inside.set()
            release.wait(60)

    other = threading.Thread(target=hold)
    other.start()
    try:
        assert inside.wait(60)
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other thread still decodes
    finally:
        release.set()
        other.join(60)
    assert gc.isenabled()


def test_a_debezium_json_batch_is_decoded_with_the_collector_paused() -> None:
    states: list[bool] = []

    class Watched(Record):
        __slots__ = ()

        def value(self) -> bytes | None:
            states.append(gc.isenabled())
            return super().value()

    batch = [
        Watched(r.topic(), r.partition(), r.offset(), key=r.key(), value=r.value())
        for r in records("apache-flink/debezium-data-schema-include.txt")
    ]
    assert DebeziumJsonDecoder().decode(batch)
    assert states and not any(states)
    assert gc.isenabled()
