"""A dead letter too large for its topic is cut to fit, saying so and how large it was."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.connectors.kafka.dead_letter import DeadLetterRecord

ORIGIN = (("ferry.topic", b"orders"), ("ferry.partition", b"0"), ("ferry.offset", b"7"))


def test_a_record_that_fits_is_kept_as_it_is() -> None:
    record = DeadLetterRecord(b"k", b"v" * 100, ORIGIN)
    assert record.truncated(1000) is record


def test_a_record_too_large_is_cut_with_its_original_sizes() -> None:
    record = DeadLetterRecord(b'{"id":2}', b"v" * 10_000, ORIGIN)
    cut = record.truncated(1000)
    headers = dict(cut.headers)
    assert cut.size <= 1000
    assert cut.key == b'{"id":2}' and cut.value is not None and cut.value != b"v" * 10_000
    assert (headers["ferry.truncated"], headers["ferry.original-value-size"]) == (b"true", b"10000")
    assert headers["ferry.original-key-size"] == b"8" and headers["ferry.offset"] == b"7"
    # cutting again keeps the first original sizes, once
    again = cut.truncated(500)
    assert dict(again.headers)["ferry.original-value-size"] == b"10000"
    assert [n for n, _ in again.headers].count("ferry.truncated") == 1


@given(
    key=st.one_of(st.none(), st.binary(max_size=3000)),
    value=st.one_of(st.none(), st.binary(max_size=3000)),
    limit=st.integers(min_value=300, max_value=4000),
)
def test_a_cut_record_fits_and_keeps_prefixes(key: bytes | None, value: bytes | None, limit: int) -> None:
    cut = DeadLetterRecord(key, value, ORIGIN).truncated(limit)
    assert cut.size <= limit
    assert (cut.key is None) == (key is None) and (cut.value is None) == (value is None)
    assert (key or b"").startswith(cut.key or b"") and (value or b"").startswith(cut.value or b"")
