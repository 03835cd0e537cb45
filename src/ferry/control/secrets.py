"""Secrets in a job file, hidden from whoever reads it.

A job is shown with every secret as :data:`MASK` (:func:`mask_job_text`), recognised two ways:

* by its key (:func:`is_secret_key`): ``password``, ``secret``, ``token``, ``credential``,
  ``sasl.jaas.config``, ``sasl.oauthbearer.config``, ``user-info``, ``passphrase``,
  ``Authorization`` (a catalog's ``header.Authorization``), a connection string, access, private,
  account, API and keystore keys, ``ssl.key.*`` and every setting librdkafka flags as sensitive
  (``ssl.ca.pem``, ``sasl.oauthbearer.assertion.private.key.*``) but ``sasl.username`` (a user
  name is shown: it names who connects, and masking it would mask it in every log line); every
  ``SecretStr`` option of ferry's job model has such a name;
* by its value, whatever its key (:func:`mask_value`): a PEM private key, an ``Authorization``
  header's ``Bearer``/``Basic`` credentials, the password of a URL (``postgresql://user:secret@``),
  and the secret fields of a connection string or a query (``AccountKey=``, ``SharedAccessKey=``,
  ``password=``, ``clientSecret=``: only their values are masked).

A value that is only an ``${ENV}`` reference is kept: it names where the secret comes from, not
the secret. A value that YAML repeats through an alias (``&pw`` ... ``*pw``) is masked wherever
it appears. A job sent back as it was shown (a masked value where the stored job has the secret)
keeps the stored secret (:func:`restore_secrets`).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ruamel.yaml import YAML

__all__ = [
    "MASK",
    "is_secret_key",
    "mask_job_text",
    "mask_url_credentials",
    "mask_value",
    "restore_secrets",
    "secret_parts",
    "write_private",
]

MASK = "******"

_SECRET_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|credential|jaas\.config|oauthbearer\.config|user[-_.]info|"
    r"(access|private|api|account|keystore)[-_.]?key|ssl[-_.]key|key[-_.]pem|ssl\.ca\.pem|"
    r"signature|authorization|connection[-_.]?string|cookie",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@", re.I
)
_REFERENCE = re.compile(r"\s*\$\{[^}]*\}\s*")
#: Values that are a secret whole, whatever their key.
_SECRET_VALUE = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----|^\s*(Bearer|Basic|Negotiate)\s+\S", re.IGNORECASE
)
#: The secret fields of a connection string (``;``-separated), a query (``&``) or a list of
#: settings (spaces): ``AccountKey=...``, ``password=...``, ``clientSecret=...``.
_SECRET_FIELD = re.compile(
    r"(?P<name>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig|password|passwd|pwd|"
    r"[\w.-]*secret|[\w.-]*token|api[-_.]?key)\s*=\s*)(?P<quote>[\"']?)(?P<value>[^;&\s\"']+)",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    """Whether the values of ``key`` are secrets (see the module documentation)."""
    return _SECRET_KEY.search(key) is not None


def mask_url_credentials(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` with the password masked."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)


def mask_value(key: str, value: str) -> str:
    """``value`` as it is shown: :data:`MASK` for a secret key's value or a secret value, the
    value with its secret parts masked, or the value itself (an ``${ENV}`` reference is no secret)."""
    if _REFERENCE.fullmatch(value):
        return value
    if is_secret_key(key) or _SECRET_VALUE.search(value):
        return MASK
    if "://" in value:
        value = mask_url_credentials(value)
    if "=" in value:
        value = _SECRET_FIELD.sub(
            lambda m: m[0] if m["value"].startswith("${") else f"{m['name']}{m['quote']}{MASK}", value
        )
    return value


def secret_parts(key: str, value: str) -> list[str]:
    """The secrets :func:`mask_value` hides in ``value`` (for the log's mask)."""
    if _REFERENCE.fullmatch(value):
        return []
    if is_secret_key(key) or _SECRET_VALUE.search(value):
        return [value]
    found = [m["password"] for m in _URL_CREDENTIALS.finditer(value)]
    found += [m["value"] for m in _SECRET_FIELD.finditer(value) if not m["value"].startswith("${")]
    return found


def mask_job_text(text: str) -> str:
    """The job file's text with its secrets masked (see the module documentation). Text that is
    not a YAML mapping is masked line by line, as far as its URLs go."""
    yaml = _yaml()
    try:
        document = yaml.load(text)
    except Exception:
        return mask_url_credentials(text)
    if not isinstance(document, dict):
        return mask_url_credentials(text)
    secrets: set[str] = set()

    def mask(key: str, value: str) -> str:
        shown = mask_value(key, value)
        if shown != value:
            secrets.add(value)
            secrets.update(secret_parts(key, value))
        return shown

    _walk(document, mask)
    if not secrets:
        return text
    # the same value elsewhere (a YAML alias, a copy) is the same secret
    _walk(document, lambda _, value: MASK if value in secrets else value)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def restore_secrets(text: str, stored: str) -> str:
    """``text`` (a job sent back as it was shown) with each value that is the masked form of the
    stored job's value at the same place replaced by the stored value: a job read, edited and sent
    back keeps its secrets. Anything else is taken as sent."""
    if MASK not in text:
        return text
    yaml = _yaml()
    try:
        document, old = yaml.load(text), yaml.load(stored)
    except Exception:
        return text
    if not isinstance(document, dict) or not isinstance(old, dict):
        return text
    restored = _restore(document, old)
    if not restored:
        return text
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _restore(node: Any, old: Any) -> bool:
    restored = False
    if isinstance(node, dict) and isinstance(old, dict):
        places: list[tuple[Any, Any]] = [(k, old.get(k)) for k in node]
    elif isinstance(node, list) and isinstance(old, list):
        places = [(i, old[i] if i < len(old) else None) for i in range(len(node))]
    else:
        return False
    for place, before in places:
        value = node[place]
        if isinstance(value, dict | list):
            restored = _restore(value, before) or restored
        elif (
            isinstance(value, str)
            and MASK in value
            and isinstance(before, str)
            and before != value
            and value in (mask_value(str(place), before), MASK)
        ):
            node[place] = before
            restored = True
    return restored


def _yaml() -> YAML:
    from ruamel.yaml import YAML  # noqa: PLC0415 - the log's filter needs no YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    return yaml


def _walk(node: Any, mask: Callable[[str, str], str], key: str = "") -> None:
    """Every string under ``node`` replaced by ``mask(its key, it)`` (a list item has its list's key)."""
    if isinstance(node, dict):
        for k in list(node):
            value = node[k]
            if isinstance(value, dict | list):
                _walk(value, mask, str(k))
            elif isinstance(value, str):
                shown = mask(str(k), str(value))
                if shown != value:
                    node[k] = shown
            elif (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and mask(str(k), str(value)) != str(value)  # a number as a password is one too
            ):
                node[k] = MASK
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, dict | list):
                _walk(item, mask, key)
            elif isinstance(item, str):
                shown = mask(key, str(item))
                if shown != item:
                    node[i] = shown


def write_private(path: Path, text: str) -> None:
    """Write ``text`` (a job file: it may hold inline secrets) to a file that only its owner can
    read, created so (mode 0600) rather than narrowed after: a file an earlier version left
    readable to others is replaced, not rewritten in place."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
