"""Which errors of a table's storage are retried: those an operator can remove (a full disk, a
file-size limit, a read-only file system or folder), as the OS raises them and as pyarrow words
them; anything else is not."""

from __future__ import annotations

import errno
import os
import resource
import signal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ferry.sinks.base.table_format import storage_may_recover


def test_a_write_past_the_file_size_limit_may_recover(tmp_path: Path) -> None:
    # the limit of this process, lowered for one write and restored (SIGXFSZ is ignored by Python)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN
    table = pa.table({"v": [os.urandom(64).hex() for _ in range(2000)]})
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(OSError) as refused:
            pq.write_table(table, tmp_path / "rows.parquet")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert storage_may_recover(refused.value), refused.value


@pytest.mark.parametrize(
    "code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM]
)
def test_the_storage_errors_an_operator_can_remove_may_recover(code: int) -> None:
    error = OSError(code, os.strerror(code))
    assert storage_may_recover(error)
    wrapped = RuntimeError("committing rows")
    wrapped.__cause__ = error
    assert storage_may_recover(wrapped)


def test_other_errors_do_not() -> None:
    assert not storage_may_recover(OSError(errno.ENOENT, os.strerror(errno.ENOENT)))
    assert not storage_may_recover(ValueError("a value that does not fit"))
