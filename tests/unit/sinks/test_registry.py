"""The registry of sinks, built from each sink's own declaration."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ferry.sinks.base.exceptions import SinkError
from ferry.sinks.base.registry import DESTINATIONS, SINKS, declaration

PYPROJECT = Path(__file__).parents[3] / "pyproject.toml"
CLIENT_LIBRARIES = ("pyiceberg", "pypaimon", "odps", "pyfluss", "pymysql", "psycopg", "starrocks")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_importing_the_sinks_and_the_job_model_loads_no_client_library() -> None:
    loaded = _python(
        "import sys, ferry.sinks, ferry.sinks.base.registry, ferry.config\n"
        f"print(sorted(m for m in {CLIENT_LIBRARIES!r} if m in sys.modules))"
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_a_missing_client_library_names_the_extra() -> None:
    result = _python(
        "import sys\n"
        "sys.modules['pyiceberg'] = None\n"
        "from ferry.sinks.base.exceptions import MissingExtraError\n"
        "from ferry.sinks.base.registry import sink_class\n"
        "try:\n"
        "    sink_class('iceberg')\n"
        "except MissingExtraError as e:\n"
        "    print(e.extra, '|', e)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("iceberg | the iceberg sink needs the 'iceberg' extra")


def test_an_unknown_sink_type_names_the_known_ones() -> None:
    with pytest.raises(SinkError, match="unknown sink type; known: fluss, hologres, iceberg"):
        declaration("parquet")


def test_each_extra_a_sink_names_is_one_the_package_offers() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    everything = extras["all"][0]
    for declared in SINKS.values():
        if declared.extra is not None:
            assert declared.extra in extras, declared.type
            assert declared.extra in everything, f"ferry[all] lacks {declared.extra}"


def test_each_sink_class_takes_its_type_and_capabilities_from_its_declaration() -> None:
    for declared in SINKS.values():
        cls = declared.load()
        assert cls.type == declared.type
        if not declared.test_double:
            assert cls.capabilities is declared.capabilities


def test_the_matrix_lists_the_sinks_that_write_to_a_real_system() -> None:
    assert sorted(DESTINATIONS) == sorted(set(SINKS) - {"memory", "null"})


def test_a_declaration_whose_options_name_another_type_is_refused() -> None:
    from ferry.sinks.base import SinkCapabilities
    from ferry.sinks.base.declaration import SinkDeclaration
    from ferry.sinks.memory import MemorySinkConfig

    with pytest.raises(ValueError, match="not \\['other'\\]"):
        SinkDeclaration(
            "other", MemorySinkConfig, SinkCapabilities(changes={}), "ferry.sinks.memory:MemorySink"
        )


def test_the_matrix_speaks_the_words_of_the_router_and_the_capabilities() -> None:
    from ferry.pipeline.router import Action
    from ferry.sinks.base import Support
    from ferry.sinks.base.matrix import Outcome

    assert {a.value for a in Action} <= {o.value for o in Outcome}
    assert Outcome.APPLY_AT_END == Support.APPLY_AT_END
