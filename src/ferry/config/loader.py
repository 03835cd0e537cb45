"""Reading a job file: YAML with positions, ``${ENV}`` interpolation, errors that name line and key.

The YAML is parsed in round-trip mode so that every key keeps its line and column; the tree is
then turned into plain Python values (interpolating ``${VAR}`` and ``${VAR:-default}`` in
strings) and validated by :class:`~ferry.config.job.JobConfig`. Each pydantic error becomes one
line ``file:line:col: key.path: what``, at the deepest key of its path that the file has. Input
values are never echoed in messages: a secret option must not end up in a log.

:func:`load_model_file` reads any other YAML file the same way into another model (the server
file of ``ferry serve``).
"""

from __future__ import annotations

import difflib
import os
import re
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString
from sqlalchemy.engine import make_url

from ferry.config.exceptions import ConfigError, ConfigProblem, OptionError
from ferry.config.flink import SINK_TYPE_SPELLINGS, ignored_keys
from ferry.config.job import BoundedMode, JobConfig
from ferry.options import format_duration

Loc = tuple[str | int, ...]
Position = tuple[int, int]  # 0-based line and column, as ruamel keeps them

_VARIABLE_RE = re.compile(r"\$\$\{|\$\{([^}]*)(\}?)")
_REFERENCE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_JOB_SHAPE = "a job file is a mapping with the sections source, sink, route, transform and pipeline"

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def load_job(path: str | Path, *, env: Mapping[str, str] | None = None) -> JobConfig:
    """Read and validate a job file. ``env`` (default: ``os.environ``) resolves ``${VAR}``.

    Raises :class:`ConfigError` listing every problem with its line and key.
    """
    return read_job(path, env=env)[0]


def load_job_text(text: str, *, file: str = "<string>", env: Mapping[str, str] | None = None) -> JobConfig:
    """Validate a job given as text; ``file`` only names it in error messages."""
    return read_job_text(text, file=file, env=env)[0]


def read_job(
    path: str | Path, *, env: Mapping[str, str] | None = None
) -> tuple[JobConfig, list[ConfigProblem]]:
    """:func:`load_job`, and the warnings: Flink CDC keys that ferry accepts and ignores
    (:mod:`ferry.config.flink`), each at its line with the reason."""
    return _read_file(path, "job file", lambda text, file: read_job_text(text, file=file, env=env))


def read_job_text(
    text: str, *, file: str = "<string>", env: Mapping[str, str] | None = None
) -> tuple[JobConfig, list[ConfigProblem]]:
    """:func:`load_job_text`, and the warnings (see :func:`read_job`)."""
    warnings: list[ConfigProblem] = []

    def without_ignored(root: CommentedMap, data: dict[str, Any]) -> dict[str, Any]:
        warnings.extend(_function_warnings(root, file))
        warnings.extend(_table_pattern_warnings(root, data, file))
        sink = data.get("sink")
        sink_type = sink.get("type") if isinstance(sink, dict) else None
        for section in ("pipeline", "sink"):
            node, values = root.get(section), data.get(section)
            if not isinstance(node, CommentedMap) or not isinstance(values, dict):
                continue
            ignored = ignored_keys(section, sink_type if isinstance(sink_type, str) else None)
            for key in [k for k in values if k in ignored]:
                line, col = _key_position(node, key) or _start(node)
                reason = f"accepted and ignored: {ignored[key]}"
                warnings.append(ConfigProblem(file, line + 1, col + 1, f"{section}.{key}", reason))
                del values[key]
        return data

    job = _validate_text(text, JobConfig, file=file, shape=_JOB_SHAPE, env=env, prepare=without_ignored)
    return job, sorted(warnings, key=lambda w: (w.line or 0, w.column or 0))


def problem_at(path: str | Path, key_path: str, message: str) -> ConfigError:
    """A refusal of the key at ``key_path`` (``transform[0].projection``) of a job file, at its line
    and column (a check of the whole job that found it after the file was read)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ConfigError.at(file, message, key_path=key_path)
    return problem_in(text, file, key_path, message)


def problem_in(text: str, file: str, key_path: str, message: str) -> ConfigError:
    """:func:`problem_at` in a job's ``text`` (a request's ``spec.job``), named ``file``."""
    try:
        root = _parse(text, file)
    except ConfigError:
        return ConfigError.at(file, message, key_path=key_path)
    parts: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", key_path):
        parts.append(int(index) if index else name)
    if not isinstance(root, CommentedMap):
        return ConfigError.at(file, message, key_path=key_path)
    _, (line, col) = _locate(root, _dotted_keys(root, parts))
    return ConfigError.at(file, message, line=line + 1, column=col + 1, key_path=key_path)


def _dotted_keys(root: CommentedMap, parts: list[str | int]) -> tuple[str | int, ...]:
    """``parts`` of a key path joined back into the file's dotted keys (``pipeline``,
    ``schema.change.behavior``), the longest key a mapping of the file has at each step."""
    loc: list[str | int] = []
    node: Any = root
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(node, CommentedMap) and isinstance(part, str):
            end = i + 1
            while end < len(parts) and isinstance(parts[end], str):
                end += 1
            for j in range(end, i, -1):
                key = ".".join(str(p) for p in parts[i:j])
                if _has_key(node, key):
                    loc.append(key)
                    node, i = node[key], j
                    break
            else:
                loc.extend(parts[i:])
                break
            continue
        if isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            loc.append(part)
            node, i = node[part], i + 1
            continue
        loc.extend(parts[i:])
        break
    return tuple(loc)


def _table_pattern_warnings(root: CommentedMap, data: dict[str, Any], file: str) -> list[ConfigProblem]:
    """A warning for each transform whose ``source-table`` has an alternative of one part: it
    matches only ids without database or schema, which no change-event format gives (most often
    a regular expression written with ``\\.`` for the dot: ``mydb\\.orders`` where Flink CDC
    reads ``mydb.orders``)."""
    from ferry.model.table_patterns import TablePatternError, TableSelector  # noqa: PLC0415

    found: list[ConfigProblem] = []
    nodes, blocks = root.get("transform"), data.get("transform")
    if not isinstance(nodes, CommentedSeq) or not isinstance(blocks, list):
        return found
    for i, (node, block) in enumerate(zip(nodes, blocks, strict=False)):
        pattern = block.get("source-table") if isinstance(block, dict) else None
        if not isinstance(node, CommentedMap) or not isinstance(pattern, str):
            continue
        try:
            one_part = 1 in TableSelector(pattern).parts
        except TablePatternError:
            continue  # refused by the job's validation
        if one_part:
            line, col = _key_position(node, "source-table") or _start(node)
            suggestion = pattern.replace("\\.", ".") if "\\." in pattern else f"<database>.{pattern}"
            reason = (
                f"'{pattern}' is one part, a table without database or schema, and matches no table of "
                f"a change-event topic: the unescaped . separates database and table (\\. is any "
                f"character), as in '{suggestion}'"
            )
            found.append(ConfigProblem(file, line + 1, col + 1, f"transform[{i}].source-table", reason))
    return found


def _function_warnings(root: CommentedMap, file: str) -> list[ConfigProblem]:
    """A warning for each ``python-executable`` of a user-defined function (ignored)."""
    pipeline = root.get("pipeline")
    entries = pipeline.get("user-defined-function") if isinstance(pipeline, CommentedMap) else None
    if not isinstance(entries, CommentedSeq):
        return []
    found = []
    for i, entry in enumerate(entries):
        if isinstance(entry, CommentedMap) and "python-executable" in entry:
            line, col = _key_position(entry, "python-executable") or _start(entry)
            found.append(
                ConfigProblem(
                    file,
                    line + 1,
                    col + 1,
                    f"pipeline.user-defined-function[{i}].python-executable",
                    "accepted and ignored: ferry runs a function in the pipeline's own interpreter",
                )
            )
    return found


def load_model_file(
    path: str | Path, model: type[M], *, what: str, shape: str, env: Mapping[str, str] | None = None
) -> M:
    """Read a YAML file into ``model`` as :func:`load_job` does (``what`` names the kind of file)."""
    return _read_file(
        path, what, lambda text, file: load_model_text(text, model, file=file, shape=shape, env=env)
    )


def _read_file(path: str | Path, what: str, validate: Callable[[str, str], T]) -> T:
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError.at(file, f"cannot read the {what}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError.at(file, f"the {what} is not UTF-8 text") from None
    return validate(text, file)


def load_model_text(
    text: str, model: type[M], *, file: str, shape: str, env: Mapping[str, str] | None = None
) -> M:
    """Validate YAML text as ``model``: ``${ENV}`` resolved, errors at ``file:line:col: key``.

    ``shape`` is the message for a document that is not a mapping.
    """
    return _validate_text(text, model, file=file, shape=shape, env=env)


def _validate_text(
    text: str,
    model: type[M],
    *,
    file: str,
    shape: str,
    env: Mapping[str, str] | None,
    prepare: Callable[[CommentedMap, dict[str, Any]], dict[str, Any]] | None = None,
) -> M:
    root = _parse(text, file)
    if not isinstance(root, CommentedMap):
        raise ConfigError.at(file, shape, line=1, column=1)
    problems: list[ConfigProblem] = []
    data = _Resolver(file, os.environ if env is None else env, problems).plain(root, (), _start(root))
    if problems:
        raise ConfigError(problems)
    if prepare is not None:
        data = prepare(root, data)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        # Not chained: the text of a ValidationError shows input values, which may be secrets.
        raise ConfigError(_problems(e, root, file, model, text.splitlines())) from None


def validate_command(path: str | Path, *, env: Mapping[str, str] | None = None) -> str:
    """What ``ferry validate`` prints for a valid job: one paragraph on what it will do."""
    job = load_job(path, env=env)
    return (
        f"{path}: valid. Pipeline '{job.pipeline.name}' {reads(job)}; it {writes(job)}; "
        f"parallelism {job.pipeline.parallelism}; checkpoint every "
        f"{format_duration(job.pipeline.checkpoint_interval)}; state in "
        f"{_without_password(job.pipeline.state_url)}."
    )


def reads(job: JobConfig) -> str:
    """What a job reads, in words: format, topics, brokers, consumer group, start and end."""
    source, pipeline = job.source, job.pipeline
    if source.topic is not None:
        topics = ("topic " if len(source.topic) == 1 else "topics ") + ", ".join(source.topic)
    else:
        topics = f"the topics matching {source.topic_pattern}"
    parts = [
        f"reads {source.value_format} change events from {topics} on {source.bootstrap_servers} in "
        f"consumer group {source.properties.get('group.id', pipeline.kafka_name)}"
    ]
    if source.schema_change_topic:
        parts.append(f" and DDL from {source.schema_change_topic}")
    parts.append(f", starting at {source.scan_startup_mode}")
    if source.tables:
        parts.append(f" ({len(source.tables)} topic override{'s' * (len(source.tables) != 1)})")
    if source.scan_bounded_mode is not BoundedMode.UNBOUNDED:
        parts.append(f" and stopping at {source.scan_bounded_mode}")
    return "".join(parts)


def writes(job: JobConfig) -> str:
    """Where a job writes, in words: the sink, routes and transforms, the schema-change behaviour,
    where bad records go."""
    sink, pipeline = job.sink, job.pipeline
    parts = [f"writes to the {sink.type} sink" + (f" '{sink.name}'" if sink.name else "")]
    parts.append(
        f" through {_count(len(job.route), 'route')} and {_count(len(job.transform), 'transform')}"
        f"; schema changes: {pipeline.schema_change_behavior}"
    )
    if sink.include_schema_changes is not None:
        parts.append(f", only {', '.join(sink.include_schema_changes)}")
    if sink.exclude_schema_changes:
        parts.append(f", never {', '.join(sink.exclude_schema_changes)}")
    dead_letter = pipeline.on_bad_record == "dead-letter"
    parts.append(
        f"; bad records {f'go to {pipeline.dead_letter_topic}' if dead_letter else 'fail the pipeline'}"
    )
    return "".join(parts)


def _without_password(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


# --------------------------------------------------------------------------------------------------
# YAML


def _parse(text: str, file: str) -> Any:
    yaml = YAML(typ="rt")
    try:
        return yaml.load(text)
    except DuplicateKeyError as e:
        name = re.search(r'duplicate key "(.*?)"', str(e.problem))
        what = f"duplicate key {name.group(1)!r}" if name else "duplicate key"
        raise _yaml_error(file, e, what) from None
    except MarkedYAMLError as e:
        what = "; ".join(str(p) for p in (e.problem, e.context) if p) or "not valid YAML"
        raise _yaml_error(file, e, f"YAML syntax: {what}") from None
    except YAMLError as e:
        raise ConfigError.at(file, f"YAML syntax: {e}") from None


def _yaml_error(file: str, error: MarkedYAMLError, message: str) -> ConfigError:
    mark = error.problem_mark or error.context_mark
    if mark is None:
        return ConfigError.at(file, message)
    return ConfigError.at(file, message, line=mark.line + 1, column=mark.column + 1)


def _start(node: Any) -> Position:
    lc = getattr(node, "lc", None)
    return (lc.line, lc.col) if lc is not None and lc.line is not None else (0, 0)


def _key_position(node: CommentedMap, key: Any) -> Position | None:
    try:
        line, col = node.lc.key(key)
    except (KeyError, TypeError):  # a key merged in with ``<<:`` has no position of its own
        return None
    return line, col


def _value_position(node: CommentedMap, key: Any) -> Position | None:
    try:
        line, col = node.lc.value(key)
    except (KeyError, TypeError):
        return None
    return line, col


def _item_position(node: CommentedSeq, index: int) -> Position | None:
    try:
        line, col = node.lc.item(index)
    except (KeyError, TypeError, IndexError):
        return None
    return line, col


class _Resolver:
    """Turns the round-trip tree into plain values, interpolating ``${VAR}`` in strings."""

    def __init__(self, file: str, env: Mapping[str, str], problems: list[ConfigProblem]) -> None:
        self.file = file
        self.env = env
        self.problems = problems

    def plain(self, node: Any, path: Loc, position: Position) -> Any:
        if isinstance(node, CommentedMap):
            return {
                _scalar(key): self.plain(
                    value, (*path, _scalar(key)), _value_position(node, key) or _start(node)
                )
                for key, value in node.items()
            }
        if isinstance(node, CommentedSeq):
            return [
                self.plain(item, (*path, i), _item_position(node, i) or position)
                for i, item in enumerate(node)
            ]
        if isinstance(node, TaggedScalar):
            self._problem(path, position, f"unsupported YAML tag {node.tag.value}")
            return None
        if isinstance(node, str):
            return self.interpolate(str(node), path, position)
        return _scalar(node)

    def interpolate(self, text: str, path: Loc, position: Position) -> str:
        if "$" not in text:
            return text

        def substitute(match: re.Match[str]) -> str:
            if match.group(0) == "$${":
                return "${"
            body, closed = match.group(1), match.group(2)
            reference = _REFERENCE_RE.fullmatch(body)
            if not closed or reference is None:
                self._problem(path, position, "a variable is written ${NAME} or ${NAME:-default}")
                return ""
            name, default = reference.group(1), reference.group(2)
            value = self.env.get(name)
            if default is not None and not value:
                return default
            if value is None:
                self._problem(path, position, f"environment variable {name} is not set (and has no default)")
                return ""
            return value

        return _VARIABLE_RE.sub(substitute, text)

    def _problem(self, path: Loc, position: Position, message: str) -> None:
        line, col = position
        self.problems.append(ConfigProblem(self.file, line + 1, col + 1, _format_path(path), message))


def _scalar(value: Any) -> Any:
    """ruamel's scalar subclasses (``ScalarInt``, ``ScalarFloat``, quoted strings) as plain values."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


# --------------------------------------------------------------------------------------------------
# Validation errors → problems


def _problems(
    error: ValidationError,
    root: CommentedMap,
    file: str,
    model: type[BaseModel],
    lines: Sequence[str] = (),
) -> list[ConfigProblem]:
    problems: dict[tuple[int, int, str, str], ConfigProblem] = {}
    for details in error.errors(include_input=False, include_url=False):
        loc: Loc = tuple(details["loc"])
        cause = details.get("ctx", {}).get("error")
        if isinstance(cause, OptionError):
            loc = (*loc, *cause.path)
        key_path, position = _locate(root, loc)
        if isinstance(cause, OptionError) and cause.offset is not None:
            position = _in_value(root, loc, cause.offset, lines) or position
        line, col = position
        message = _message(details, loc, model)
        problems[(line, col, key_path, message)] = ConfigProblem(file, line + 1, col + 1, key_path, message)
    return [problems[k] for k in sorted(problems)]


def _message(details: ErrorDetails, loc: Loc, root_model: type[BaseModel]) -> str:
    kind = details["type"]
    if kind == "missing":
        return "missing required key"
    if kind == "extra_forbidden":
        return "unknown key" + _suggestion(loc, root_model)
    if kind in ("value_error", "assertion_error"):
        cause = details.get("ctx", {}).get("error")
        return str(cause) if cause is not None else details["msg"]
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "expected a mapping of keys to values"
    if kind in ("tuple_type", "list_type"):
        return "expected a list"
    return details["msg"]


def _locate(root: CommentedMap, loc: Loc) -> tuple[str, Position]:
    """The key path (with YAML key names) and position of the deepest key of ``loc`` in the file.

    Skips the union tags pydantic puts in ``loc`` (``sink.iceberg.x`` is ``sink.x`` in the file)
    and joins the keys a model folded into a dict (``catalog.properties`` + ``uri``).
    """
    node: Any = root
    position = _start(root)
    names: list[str | int] = []
    i = 0
    while i < len(loc):
        part = loc[i]
        if isinstance(node, CommentedMap):
            if _has_key(node, part):
                position = _key_position(node, part) or position
                names.append(part)
                node = node[part]
                i += 1
                continue
            folded = _folded_key(node, part, loc[i + 1]) if i + 1 < len(loc) else None
            if folded is not None:
                position = _key_position(node, folded) or position
                names.append(folded)
                node = node[folded]
                i += 2
                continue
            tag = node.get("type")
            if isinstance(part, str) and isinstance(tag, str) and part in (tag, SINK_TYPE_SPELLINGS.get(tag)):
                i += 1
                continue
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            position = _item_position(node, part) or position
            names.append(part)
            node = node[part]
            i += 1
            continue
        names.extend(loc[i:])
        break
    return _format_path(names), position


def _in_value(root: CommentedMap, loc: Loc, offset: int, lines: Sequence[str]) -> Position | None:
    """Where character ``offset`` of the text value at ``loc`` is in the file: exact for a value on
    one line (plain or quoted), and for block scalars (``|``, ``>``) by their lines."""
    node: Any = root
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    key = loc[-1] if loc else None
    if not isinstance(node, CommentedMap) or not isinstance(node.get(key), str):
        return None
    start = _value_position(node, key)
    if start is None:
        return None
    line, col = start
    value = str(node[key])
    if isinstance(node[key], LiteralScalarString | FoldedScalarString):
        before = value[:offset]
        row = line + 1 + before.count("\n")
        if row >= len(lines):
            return None
        indent = len(lines[row]) - len(lines[row].lstrip(" "))
        return row, indent + len(before.rsplit("\n", 1)[-1])
    if "\n" in value:
        return None
    source = lines[line] if line < len(lines) else ""
    quoted = int(source[col : col + 1] in ("'", '"'))
    written = source[col + quoted :]
    # a double-quoted value may have escapes; its offset is then the nearest match of the text
    if not written.startswith(value[:offset]):
        return line, col
    return line, col + quoted + offset


def _has_key(node: CommentedMap, key: Any) -> bool:
    try:
        return key in node
    except TypeError:
        return False


def _folded_key(node: CommentedMap, part: str | int, following: str | int) -> str | None:
    if not isinstance(part, str) or not isinstance(following, str):
        return None
    for prefix in dict.fromkeys((part, part.replace("_", "."))):
        if f"{prefix}.{following}" in node:
            return f"{prefix}.{following}"
    return None


def _format_path(names: Sequence[str | int]) -> str:
    text = ""
    for name in names:
        text += f"[{name}]" if isinstance(name, int) else (f".{name}" if text else str(name))
    return text


def _suggestion(loc: Loc, root_model: type[BaseModel]) -> str:
    model = _model_at(loc[:-1], root_model)
    if model is None or not isinstance(loc[-1], str):
        return ""
    key = loc[-1]
    # An open-ended option group (a dict field that ``fold_prefixed`` fills): a misspelt prefix.
    groups = [
        (field.alias or name).replace("_", ".")
        for name, field in model.model_fields.items()
        if get_origin(_unwrap(field.annotation)) is dict
    ]
    for i, char in enumerate(key):
        prefix = difflib.get_close_matches(key[:i], groups, n=1, cutoff=0.8) if char == "." else []
        if prefix:
            return f" (did you mean '{prefix[0]}{key[i:]}'?)"
    allowed = [field.alias or name for name, field in model.model_fields.items()]
    close = difflib.get_close_matches(key, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_at(loc: Loc, root_model: type[BaseModel]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``loc`` (to suggest the keys it allows)."""
    annotation: Any = root_model
    for part in loc:
        model = _as_model(annotation)
        if model is not None:
            field = next((f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
            if field is not None:
                annotation = field.annotation
            elif not _is_tag(model, part):
                return None
            continue
        inner = _unwrap(annotation)
        members = [m for m in map(_as_model, get_args(inner)) if m is not None]
        if get_origin(inner) in (Union, types.UnionType) and members:
            chosen = next((m for m in members if _is_tag(m, part)), None)
            if chosen is None:
                return None
            annotation = chosen
        elif get_origin(inner) in (tuple, list) and isinstance(part, int):
            annotation = get_args(inner)[0]
        elif get_origin(inner) is dict:
            annotation = get_args(inner)[1]
        else:
            return None
    return _as_model(annotation)


def _unwrap(annotation: Any) -> Any:
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
            continue
        if get_origin(annotation) in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


def _as_model(annotation: Any) -> type[BaseModel] | None:
    inner = _unwrap(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _is_tag(model: type[BaseModel], part: str | int) -> bool:
    field = model.model_fields.get("type")
    return field is not None and part in get_args(field.annotation)
