"""The ``transform`` blocks and ``pipeline.user-defined-function`` entries of a job file.

A transform's ``projection`` and ``filter`` are parsed when the job is read (a syntax error names
its place); the job as a whole then refuses a function that transforms do not evaluate, at its
place in the expression and in the job file's spelling (:func:`check_transform_expressions`).
A user-defined function is a Python callable (``classpath: module:function``) or Python code
(``python-code``), type-checked from its source when the job is validated, without running it
(:mod:`ferry.transform.udf_source`), and imported by the pipeline (:mod:`ferry.transform.udf`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ferry.config.exceptions import OptionError
from ferry.model.table_patterns import TableSelector
from ferry.options import ConfigModel
from ferry.transform.function_catalog import BUILT_IN_NAMES
from ferry.transform.udf import UserFunction, UserFunctionError, load
from ferry.transform.udf_source import declare


def check_regex(pattern: str | None) -> str | None:
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"not a valid regular expression: {e}") from None
    return pattern


def _split_columns(value: str | None) -> tuple[str, ...]:
    return () if value is None else tuple(part.strip() for part in value.split(","))


class TransformConfig(ConfigModel):
    """Project, filter and re-key the tables ``source-table`` names (a table pattern:
    ``mydb.orders``, ``mydb.\\.*``; :class:`~ferry.model.table_patterns.TableSelector`)."""

    source_table: str = Field(alias="source-table")
    projection: str | None = None
    filter: str | None = None
    primary_keys: str | None = Field(default=None, alias="primary-keys")
    partition_keys: str | None = Field(default=None, alias="partition-keys")
    #: Options of the tables the sink creates, ``key1=value1,key2=value2``.
    table_options: str | None = Field(default=None, alias="table-options")
    table_options_delimiter: str = Field(default=",", alias="table-options.delimiter", min_length=1)
    #: ``SOFT_DELETE``: a delete is written as an insert of the row it removes.
    converter_after_transform: Literal["SOFT_DELETE"] | None = Field(
        default=None, alias="converter-after-transform"
    )
    description: str | None = None

    @field_validator("source_table")
    @classmethod
    def _table_pattern(cls, value: str) -> str:
        TableSelector(value)  # raises TablePatternError, a ValueError saying what is wrong
        return value

    @field_validator("projection", "filter")
    @classmethod
    def _expression_syntax(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            # sqlglot is loaded only for jobs with transforms
            from ferry.transform.blocks import parse_filter, parse_projection  # noqa: PLC0415

            (parse_projection if info.field_name == "projection" else parse_filter)(value)
        return value

    @field_validator("primary_keys", "partition_keys")
    @classmethod
    def _column_list(cls, value: str | None) -> str | None:
        if value is not None and not all(_split_columns(value)):
            raise ValueError("a comma-separated list of column names, without empty entries")
        return value

    @field_validator("converter_after_transform", mode="before")
    @classmethod
    def _converter_name(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _table_options_pairs(self) -> Self:
        if self.table_options is not None:
            for entry in self.table_options.split(self.table_options_delimiter):
                key, equals, _ = entry.partition("=")
                if not equals or not key.strip():
                    raise OptionError(
                        f"{entry.strip()!r} is not key=value (entries are separated by "
                        f"{self.table_options_delimiter!r}; table-options.delimiter sets another)",
                        "table-options",
                    )
        return self

    @property
    def primary_key_columns(self) -> tuple[str, ...]:
        return _split_columns(self.primary_keys)

    @property
    def partition_key_columns(self) -> tuple[str, ...]:
        return _split_columns(self.partition_keys)

    @property
    def table_option_map(self) -> dict[str, str]:
        """``table-options`` as a mapping (empty without it)."""
        if self.table_options is None:
            return {}
        pairs = (e.partition("=") for e in self.table_options.split(self.table_options_delimiter))
        return {key.strip(): value.strip() for key, _, value in pairs}


_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UserDefinedFunctionConfig(ConfigModel):
    """One ``pipeline.user-defined-function`` entry: the name expressions call it by, and a
    Python callable (``classpath: module:function`` or ``module:Class``) or its code
    (``python-code``, a function named ``eval``)."""

    name: str
    classpath: str | None = None
    python_code: str | None = Field(default=None, alias="python-code")
    #: Folders or zip archives put on the import path before the function is loaded.
    python_files: tuple[str, ...] = Field(default=(), alias="python-files")
    #: Given to a class's ``open(options)`` before its first call.
    options: dict[str, str] = Field(default_factory=dict)
    #: Flink CDC's interpreter for its Python functions: accepted with a warning (ferry's run in
    #: the pipeline's own interpreter).
    python_executable: str | None = Field(default=None, alias="python-executable")

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _NAME_RE.fullmatch(value):
            raise ValueError("a function name is a SQL identifier: letters, digits and _")
        return value

    @field_validator("options", mode="before")
    @classmethod
    def _text_options(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.classpath is None) == (self.python_code is None):
            raise OptionError("give one of classpath (module:function) and python-code", "classpath")
        if self.python_code is not None and self.options:
            raise OptionError("python-code takes no options (give a class by classpath)", "options")
        return self


def _other_paths(entries: Sequence[UserDefinedFunctionConfig], entry: UserDefinedFunctionConfig) -> list[str]:
    """The ``python-files`` of the other entries that exist (a missing one is its own entry's error)."""
    return [p for e in entries if e is not entry for p in e.python_files if Path(p).expanduser().exists()]


def load_functions(
    entries: Sequence[UserDefinedFunctionConfig], *, runnable: bool = False
) -> dict[str, UserFunction]:
    """The job's user-defined functions by name: declared from their source (validation runs none
    of their code), or ``runnable``, imported; raises :class:`OptionError` at the entry that cannot
    be one."""
    make = load if runnable else declare
    functions: dict[str, UserFunction] = {}
    for i, entry in enumerate(entries):
        if entry.name.upper() in (name.upper() for name in functions):
            raise OptionError(
                f"the function {entry.name} is declared twice", "user-defined-function", i, "name"
            )
        if entry.name.upper() in BUILT_IN_NAMES:
            raise OptionError(
                f"{entry.name} is a built-in function of transforms: give the function another name",
                "user-defined-function",
                i,
                "name",
            )
        try:
            functions[entry.name] = make(
                entry.name,
                classpath=entry.classpath,
                python_code=entry.python_code,
                # one interpreter: the paths of every entry are on its import path, this entry's first
                python_files=(*entry.python_files, *_other_paths(entries, entry)),
                options=entry.options,
            )
        except UserFunctionError as e:
            key = "classpath" if entry.classpath is not None else "python-code"
            raise OptionError(str(e), "user-defined-function", i, key) from None
    return functions


def check_transform_expressions(
    transforms: Sequence[TransformConfig], functions: Mapping[str, UserFunction]
) -> None:
    """Refuse the first expression that calls a function transforms do not evaluate (or a
    user-defined one with the wrong number of arguments), at its place."""
    if not transforms:
        return
    from ferry.transform.checks import expression_problems  # noqa: PLC0415

    problems = expression_problems(transforms, functions)
    if problems:
        first = problems[0]
        raise OptionError(first.message, "transform", first.index, first.key, offset=first.offset)
