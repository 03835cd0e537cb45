"""A sink whose process dies right before or right after it took a schema change: the runner
that drove it is abandoned (what it wrote and did not commit is lost) and a new one starts from the
last checkpoint, as after a SIGKILL."""

from __future__ import annotations

from collections.abc import Collection

from ferry.model.events import RenameColumn, SchemaChange
from ferry.model.schema import Schema
from ferry.sinks.memory import MemorySink, OffsetCommittingMemorySink


class Killed(BaseException):
    """The process dies: nothing after this point runs (not an error a retry policy would see)."""


class KilledAtRename(MemorySink):
    """The memory sink whose process dies right before (``before``) or right after the sink took
    the renames (or the changes of another ``kind``) numbered in ``kills`` (1: the first one it is
    asked to apply)."""

    def __init__(
        self, kills: Collection[int], *, before: bool, kind: type[SchemaChange] = RenameColumn
    ) -> None:
        super().__init__()
        self.kills, self.before, self.kind = set(kills), before, kind
        self.renames = 0

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        if isinstance(change, self.kind):
            self.renames += 1
        killed = isinstance(change, self.kind) and self.renames in self.kills
        if killed and self.before:
            raise Killed(f"before {change}")
        super().apply_schema_change(change, schema_after)
        if killed:
            raise Killed(f"after {change}")


class KilledAtRenameByTable(KilledAtRename, OffsetCommittingMemorySink):
    """The same, recording offsets per table as Iceberg and Paimon do: a barrier commits the
    changed table alone."""


def killed_at_rename(
    kills: Collection[int], *, before: bool, per_table: bool, kind: type[SchemaChange] = RenameColumn
) -> KilledAtRename:
    return (KilledAtRenameByTable if per_table else KilledAtRename)(kills, before=before, kind=kind)
