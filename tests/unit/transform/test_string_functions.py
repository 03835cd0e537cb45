"""String functions: Flink CDC's results, NULL in NULL out, positions from 1."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.expressions import compiled, value

from ferry.model.types import ARRAY, BOOLEAN, BYTES, INT, STRING

ROW = {"s": "foo 12-34 boo", "u": "bar", "bin": b"\x00ab"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REGEXP_REPLACE(s, 'o+', '0')", "f0 12-34 b0"),
        ("REGEXP_REPLACE(s, '(\\d+)-(\\d+)', '$2-$1')", "foo 34-12 boo"),
        ("REGEXP_REPLACE(s, 'o', '\\$')", "f$$ 12-34 b$$"),
        ("REGEXP_REPLACE(s, '(', 'x')", None),  # a pattern that does not compile
        ("REGEXP_EXTRACT(s, '(\\d+)-(\\d+)')", "12-34"),
        ("REGEXP_EXTRACT(s, '(\\d+)-(\\d+)', 2)", "34"),
        ("REGEXP_EXTRACT(s, '(\\d+)', 3)", None),
        ("REGEXP_EXTRACT(s, 'xyz')", None),
        ("REGEXP_EXTRACT_ALL(s, '(\\d)(\\d)')", ["1", "3"]),
        ("REGEXP_EXTRACT_ALL(s, '\\d\\d', 0)", ["12", "34"]),
        ("REGEXP_EXTRACT_ALL(s, '(xyz)')", []),
        ("REGEXP_EXTRACT_ALL(s, 'xyz')", None),  # group 1, which the pattern lacks
        ("REGEXP_COUNT(s, 'o')", 4),
        ("REGEXP_COUNT(s, 'xyz')", 0),
        ("REGEXP_INSTR(s, '\\d')", 5),
        ("REGEXP_INSTR(s, 'xyz')", 0),
        ("REGEXP_SUBSTR(s, '\\d+')", "12"),
        ("REGEXP_SUBSTR(s, 'xyz')", None),
        ("s SIMILAR TO 'foo%(boo|bar)'", True),
        ("s NOT SIMILAR TO 'foo%'", False),
        ("u SIMILAR TO 'b_r'", True),
        ("'10%' SIMILAR TO '10!%' ESCAPE '!'", True),
        ("'100' SIMILAR TO '10!%' ESCAPE '!'", False),
    ],
)
def test_regular_expressions(text: str, expected: Any) -> None:
    assert value(text, ROW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("POSITION('o' IN s)", 2),
        ("POSITION('' IN s)", 1),
        ("POSITION('o' IN s FROM 4)", 12),
        ("POSITION('o' IN s FROM 40)", 0),
        ("LOCATE('o', s)", 2),
        ("LOCATE('o', s, 4)", 12),
        ("LOCATE('o', s, 40)", 0),
        ("INSTR(s, 'boo')", 11),
        ("INSTR(s, 'zzz')", 0),
        ("OVERLAY(s PLACING 'XY' FROM 5)", "foo XY-34 boo"),
        ("OVERLAY(s PLACING 'XY' FROM 5 FOR 5)", "foo XY boo"),
        ("OVERLAY(s PLACING 'XY' FROM 50)", "foo 12-34 boo"),
        ("CONCAT_WS('-', u, s)", "bar-foo 12-34 boo"),
        ("CONCAT_WS('-', u, NULL, u)", "bar-bar"),
        ("CONCAT_WS(NULL, u, u)", None),
        ("LPAD(u, 6, 'xy')", "xyxbar"),
        ("RPAD(u, 6, 'xy')", "barxyx"),
        ("LPAD(u, 2, 'x')", "ba"),
        ("LPAD(u, -1, 'x')", None),
        ("RPAD(u, 5, '')", None),
        ("REPLACE(s, 'oo', '0')", "f0 12-34 b0"),
        ("REPEAT(u, 3)", "barbarbar"),
        ("REPEAT(u, -1)", ""),
        ("LEFT(u, 2)", "ba"),
        ("LEFT(u, -2)", ""),
        ("RIGHT(u, 2)", "ar"),
        ("RIGHT(u, 9)", "bar"),
        ("STARTSWITH(s, 'foo')", True),
        ("ENDSWITH(s, 'foo')", False),
        ("STARTSWITH(bin, bin)", True),
        ("LTRIM('xxbarxx', 'x')", "barxx"),
        ("RTRIM('xxbarxx', 'x')", "xxbar"),
        ("BTRIM('  bar  ')", "bar"),
        ("BTRIM('xybarxy', 'yx')", "bar"),
        ("INITCAP('hello WORLD, it''s ferry')", "Hello World, It'S Ferry"),
        ("TO_BASE64(u)", "YmFy"),
        ("TO_BASE64(bin)", "AGFi"),
        ("FROM_BASE64('YmFy')", "bar"),
        ("FROM_BASE64_BINARY('AGFi')", b"\x00ab"),
    ],
)
def test_pieces_positions_padding_and_encodings(text: str, expected: Any) -> None:
    assert value(text, ROW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REGEXP_REPLACE(s, 'a', 'b')", STRING()),
        ("REGEXP_EXTRACT_ALL(s, 'a')", ARRAY(STRING())),
        ("REGEXP_COUNT(s, 'a')", INT()),
        ("LOCATE('a', s)", INT()),
        ("STARTSWITH(s, 'a')", BOOLEAN()),
        ("FROM_BASE64_BINARY(s)", BYTES()),
        ("UUID()", STRING().not_null()),
    ],
)
def test_types(text: str, expected: Any) -> None:
    assert compiled(text).type == expected


@pytest.mark.parametrize(
    "text",
    [
        "REGEXP_REPLACE(s, 'a', 'b')",
        "REGEXP_REPLACE(u, s, 'b')",
        "REGEXP_EXTRACT(s, 'a')",
        "REGEXP_COUNT(s, 'a')",
        "s SIMILAR TO 'a'",
        "LOCATE('a', s)",
        "OVERLAY(s PLACING 'x' FROM 1)",
        "LPAD(s, 3, 'x')",
        "REPLACE(s, 'a', 'b')",
        "REPEAT(s, 2)",
        "LEFT(s, 1)",
        "STARTSWITH(s, 'a')",
        "TO_BASE64(s)",
        "FROM_BASE64(s)",
        "INITCAP(s)",
        "BTRIM(s)",
    ],
)
def test_null_in_null_out(text: str) -> None:
    assert value(text, {}) is None


def test_uuid_is_a_new_version_4_uuid_per_row() -> None:
    fn = compiled("UUID()").fn
    first, second = fn({}), fn({})
    assert first != second and len(first) == 36 and first[14] == "4"


def test_a_base64_text_that_is_not_fails_the_row() -> None:
    with pytest.raises(ValueError, match="is not base64"):
        compiled("FROM_BASE64(s)").fn({"s": "not base64!"})
