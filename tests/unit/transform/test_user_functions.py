"""User-defined functions: Python callables named in ``pipeline.user-defined-function``, checked
when the job is validated and called from projections and filters."""

from __future__ import annotations

import datetime as dt
import textwrap
import zipfile
from pathlib import Path

import pytest
from tests.support.expressions import compiled

from ferry.config import ConfigError
from ferry.config.loader import load_job_text, read_job_text
from ferry.model.events import DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, INT, STRING
from ferry.transform.blocks import TableTransforms
from ferry.transform.compiled import CompileError
from ferry.transform.sqlvalues import ROW_ERRORS
from ferry.transform.udf import UserFunction, load

MODULE = """
import datetime as dt


def add_one(n: int) -> int:
    return None if n is None else n + 1


def label(n: int, prefix: str = "id") -> str:
    return f"{prefix}-{n}"


def year(t: dt.datetime) -> int:
    return t.year


def untyped(x):
    return x


def returns_a_tuple(n: int) -> tuple:
    return (n,)


def fails(n: int) -> int:
    raise RuntimeError("no")


class Scaled:
    def open(self, options):
        self.factor = int(options["factor"])

    def eval(self, n: int) -> int:
        return n * self.factor
"""

HEAD = """\
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: orders
sink:
  type: memory
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    (tmp_path / "ferry_test_udfs.py").write_text(MODULE)
    return tmp_path


def job_text(folder: Path, functions: str, transform: str) -> str:
    return (
        HEAD
        + "pipeline:\n  user-defined-function:\n"
        + textwrap.indent(textwrap.dedent(functions).replace("FOLDER", str(folder)), "    ")
        + "transform:\n  - source-table: db.orders\n"
        + textwrap.indent(textwrap.dedent(transform), "    ")
    )


def test_a_function_by_module_and_name_runs_in_projection_and_filter(module: Path) -> None:
    text = job_text(
        module,
        """\
        - name: inc
          classpath: ferry_test_udfs:add_one
          python-files: [FOLDER]
        - name: label
          classpath: ferry_test_udfs:label
        - name: scaled
          classpath: ferry_test_udfs:Scaled
          options:
            factor: 10
        - name: py_lower
          python-code: |
            def eval(s: str) -> str:
                return None if s is None else s.strip().lower()
        """,
        """\
        projection: id, inc(inc(id)) AS id2, label(id, 'order') AS l, scaled(id) AS s, py_lower(name) AS n
        filter: inc(id) < 10
        """,
    )
    job = load_job_text(text, file="job.yaml", env={})
    transforms = TableTransforms(job.transform, functions=job.user_functions())
    table = TableId.parse("db.orders")
    source = Schema((Column("id", INT().not_null()), Column("name", STRING())), ("id",), ())
    schema = transforms.schema(table, source)
    assert [(c.name, c.type) for c in schema.columns] == [
        ("id", INT().not_null()),
        ("id2", BIGINT()),
        ("l", STRING()),
        ("s", BIGINT()),
        ("n", STRING()),
    ]
    changes = [
        DataChange(table, Op.INSERT, None, {"id": 1, "name": " A "}, 0, 0),
        DataChange(table, Op.INSERT, None, {"id": 9, "name": None}, 1, 0),
    ]
    out = transforms.rows(table, source, changes, lambda change, why: None)
    assert [c.after for c in out] == [{"id": 1, "id2": 3, "l": "order-1", "s": 10, "n": "a"}]


@pytest.mark.parametrize(
    ("functions", "projection", "key", "words"),
    [
        (
            "- name: f\n  classpath: com.example.AddOne\n",
            "f(id) AS x",
            "[0].classpath",
            "not a Python callable",
        ),
        (
            "- name: f\n  classpath: no_such_module:f\n",
            "f(id) AS x",
            "[0].classpath",
            "cannot find module no_such_module",
        ),
        (
            "- name: f\n  classpath: ferry_test_udfs:nope\n  python-files: [FOLDER]\n",
            "f(id) AS x",
            "[0].classpath",
            "no function or class nope",
        ),
        (
            "- name: f\n  classpath: ferry_test_udfs:untyped\n  python-files: [FOLDER]\n",
            "f(id) AS x",
            "[0].classpath",
            "needs a return annotation",
        ),
        (
            "- name: f\n  classpath: ferry_test_udfs:returns_a_tuple\n  python-files: [FOLDER]\n",
            "f(id) AS x",
            "[0].classpath",
            "has no SQL type",
        ),
        ("- name: f\n  python-code: 'x = 1'\n", "f(id) AS x", "[0].python-code", "no function named eval"),
        (
            "- name: f\n  python-code: 'def eval(x) -> int: return 1'\n  options: {a: b}\n",
            "f(id) AS x",
            "[0].options",
            "takes no options",
        ),
        (
            "- name: f\n  classpath: ferry_test_udfs:add_one\n  python-files: [/no/such/folder]\n",
            "f(id) AS x",
            "[0].classpath",
            "does not exist",
        ),
    ],
)
def test_a_function_that_cannot_be_one_is_refused_at_its_entry(
    module: Path, functions: str, projection: str, key: str, words: str
) -> None:
    text = job_text(module, functions, f"projection: {projection}\n")
    with pytest.raises(ConfigError) as e:
        load_job_text(text, file="job.yaml", env={})
    assert e.value.key_path == f"pipeline.user-defined-function{key}"
    assert words in str(e.value)


def test_a_call_with_the_wrong_number_of_arguments_is_refused_at_its_place(module: Path) -> None:
    functions = "- name: inc\n  classpath: ferry_test_udfs:add_one\n  python-files: [FOLDER]\n"
    text = job_text(module, functions, "projection: id, inc(id, 2) AS x\n")
    with pytest.raises(ConfigError) as e:
        load_job_text(text, file="job.yaml", env={})
    assert e.value.key_path == "transform[0].projection"
    assert "inc takes 1 arguments, not 2" in str(e.value)
    line = text.splitlines()[e.value.line - 1]
    assert line[e.value.column - 1 :].startswith("inc(id, 2)")


def test_arguments_are_checked_against_the_annotations(module: Path) -> None:
    functions = {"year_of": load("year_of", classpath="ferry_test_udfs:year", python_files=[str(module)])}
    assert compiled("year_of(ts)", functions=functions).fn({"ts": dt.datetime(2024, 5, 1)}) == 2024
    with pytest.raises(CompileError, match="argument 1 .* is a STRING, and its parameter t takes datetime"):
        compiled("year_of(s)", functions=functions)


def test_a_function_may_have_a_name_sqlglot_knows_but_not_a_built_in_one(module: Path) -> None:
    # Flink CDC's own example names a function format; sqlglot reads FORMAT(...) as its own
    functions = (
        "- name: format\n  python-code: |\n    def eval(n: int, f: str) -> str:\n        return f % n\n"
    )
    text = job_text(module, functions, "projection: id, format(id, 'id -> %d') AS f\n")
    job = load_job_text(text, file="job.yaml", env={})
    transforms = TableTransforms(job.transform, functions=job.user_functions())
    table = TableId.parse("db.orders")
    source = Schema((Column("id", INT().not_null()),), ("id",), ())
    change = DataChange(table, Op.INSERT, None, {"id": 7}, 0, 0)
    assert transforms.rows(table, source, [change], lambda c, why: None)[0].after == {"id": 7, "f": "id -> 7"}
    refused = job_text(module, functions.replace("format", "year", 1), "projection: id\n")
    with pytest.raises(ConfigError, match="YEAR is a built-in function|year is a built-in function"):
        load_job_text(refused, file="job.yaml", env={})


def test_what_a_function_raises_or_returns_wrongly_fails_the_row(module: Path) -> None:
    def load_one(name: str) -> dict[str, UserFunction]:
        return {name: load(name, classpath=f"ferry_test_udfs:{name}", python_files=[str(module)])}

    with pytest.raises(ROW_ERRORS, match="fails raised RuntimeError: no"):
        compiled("fails(n)", functions=load_one("fails")).fn({"n": 1})
    liar = load("liar", python_code="def eval(n: int) -> int:\n    return 'one'\n")
    with pytest.raises(ROW_ERRORS, match="liar returned a str, not a int"):
        compiled("liar(n)", functions={"liar": liar}).fn({"n": 1})


def test_null_arguments_reach_the_function(module: Path) -> None:
    functions = {"inc": load("inc", classpath="ferry_test_udfs:add_one", python_files=[str(module)])}
    assert compiled("inc(n)", functions=functions).fn({}) is None


def test_flink_cdcs_python_function_entry_validates_as_written(module: Path) -> None:
    functions = (
        "- name: py_double\n  python-code: |\n    def eval(x: int) -> int:\n"
        "        return None if x is None else x * 2\n  python-executable: /usr/bin/python3\n"
    )
    text = job_text(module, functions, "projection: id, py_double(id) AS doubled\n")
    job, warnings = read_job_text(text, file="job.yaml")
    assert [w.key_path for w in warnings] == ["pipeline.user-defined-function[0].python-executable"]
    assert compiled("py_double(n)", functions=job.user_functions()).fn({"n": 21}) == 42


def test_validating_a_job_runs_none_of_its_functions_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "ferry_test_side_effects.py").write_text(
        f"import pathlib\n\npathlib.Path({str(marker)!r}).write_text('imported')\n\n\ndef f(n: int | None, xs: 'list[int]') -> int:\n    return n\n"
    )
    functions = (
        "- name: f\n  classpath: ferry_test_side_effects:f\n  python-files: [FOLDER]\n"
        f"- name: g\n  python-code: |\n    import pathlib\n    pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "    def eval(s: str) -> str:\n        return s\n"
    )
    text = job_text(tmp_path, functions, "projection: id, f(id, ARRAY[1]) AS x, g(name) AS y\n")
    job = load_job_text(text, file="job.yaml", env={})
    assert not marker.exists()
    assert job.user_functions()["f"].result == BIGINT()  # the pipeline imports them
    assert marker.exists()


def test_a_function_in_a_zip_of_python_files_is_declared_from_it(tmp_path: Path) -> None:
    archive = tmp_path / "deps.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("ferry_zipped/__init__.py", "")
        z.writestr(
            "ferry_zipped/fns.py",
            "from typing import Optional\n\ndef f(x: Optional[str]) -> bool:\n    return True\n",
        )
    functions = f"- name: f\n  classpath: ferry_zipped.fns:f\n  python-files: [{archive}]\n"
    job = load_job_text(job_text(tmp_path, functions, "filter: f(name)\n"), file="job.yaml", env={})
    assert job.transform[0].filter == "f(name)"
    with pytest.raises(ConfigError, match="f takes 1 arguments, not 2"):
        load_job_text(job_text(tmp_path, functions, "filter: f(name, id)\n"), file="job.yaml", env={})


def test_closing_the_transforms_closes_each_opened_class_once(caplog: pytest.LogCaptureFixture) -> None:
    closed: list[str] = []

    class Fails:
        def eval(self, n: int) -> int:
            return n

        def close(self) -> None:
            closed.append("fails")
            raise RuntimeError("cannot close")

    class Closes:
        def eval(self, n: int) -> int:
            return n

        def close(self) -> None:
            closed.append("closes")

    def plain(n: int) -> int:
        return n

    functions = {
        name: UserFunction.of(name, target) for name, target in [("a", Fails), ("b", Closes), ("c", plain)]
    }
    transforms = TableTransforms([], functions=functions)
    transforms.close()
    assert closed == []  # nothing was opened
    for function in functions.values():
        function.bound()
    transforms.close()
    transforms.close()
    assert closed == ["fails", "closes"]
    assert "closing the user-defined function a failed" in caplog.text
