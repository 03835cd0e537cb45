"""Python's freed arenas kept for reuse (ferry.arenas, the C module ferry._arenas).

The module is built by ``make install`` (a C compiler is at hand wherever the tests run): a test
here failing on the import means it was not built.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from ferry import _arenas, arenas

#: Small objects enough to fill this many arenas.
ARENAS = 96


def _fill() -> list[str]:
    """Strings of about 100 bytes each, enough to take ``ARENAS`` arenas of pymalloc's."""
    return [f"{i:0>90}" for i in range(ARENAS * arenas.ARENA_BYTES // 128)]


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.fixture
def kept_limit() -> Iterator[None]:
    yield
    arenas.keep_freed_arenas()  # the default limit again, for the tests after these


def test_freed_arenas_are_kept_and_reused_without_page_faults(kept_limit: None) -> None:
    arenas.keep_freed_arenas(0)  # none kept from the tests before this one in the process
    assert arenas.keep_freed_arenas()
    rows = _fill()
    first = _minor_faults()
    del rows
    assert arenas.kept_arenas() >= ARENAS // 2
    rows = _fill()  # the kept arenas again: their pages are still there
    assert arenas.kept_arenas() < ARENAS // 2
    del rows
    again = _minor_faults() - first
    # filling new arenas faults in each of their 256 pages; the kept ones fault in none
    assert again < ARENAS * 256 // 4, f"{again} page faults filling {ARENAS} arenas kept"


def test_no_more_arenas_than_the_limit_are_kept_and_a_lower_limit_gives_the_rest_back(
    kept_limit: None,
) -> None:
    arenas.keep_freed_arenas(8 * arenas.ARENA_BYTES)
    rows = _fill()
    del rows
    assert arenas.kept_arenas() == 8
    arenas.keep_freed_arenas(2 * arenas.ARENA_BYTES)
    assert arenas.kept_arenas() == 2
    arenas.keep_freed_arenas(0)
    assert arenas.kept_arenas() == 0


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        _arenas.keep(-1)
