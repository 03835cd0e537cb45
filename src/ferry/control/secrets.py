"""Secrets in a job file, hidden from whoever may only read it.

A job read by a token below ``editor`` shows every value of a secret-bearing key (``password``,
``sasl.jaas.config``, ``...secret...``, ``token``, ``user-info``, access and private keys: every
``SecretStr`` option of ferry's job model has such a name) as :data:`MASK`, and the password of
any URL with credentials (``postgresql://user:secret@host/db``) too. A value that is only an
``${ENV}`` reference is kept: it names where the secret comes from, not the secret.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML

__all__ = ["MASK", "is_secret_key", "mask_job_text", "mask_url_credentials"]

MASK = "******"

_SECRET_KEY = re.compile(
    r"password|passwd|secret|token|credential|jaas\.config|user[-_.]info|"
    r"(access|private|api|account)[-_.]?key|signature",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@", re.I
)
_REFERENCE = re.compile(r"\s*\$\{[^}]*\}\s*")


def is_secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


def mask_url_credentials(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` with the password masked."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)


def mask_job_text(text: str) -> str:
    """The job file's text with its secrets masked (see the module documentation). Text that is
    not a YAML mapping is masked line by line, as far as its URLs go."""
    yaml = YAML()
    yaml.preserve_quotes = True
    try:
        document = yaml.load(text)
    except Exception:
        return mask_url_credentials(text)
    if not isinstance(document, dict):
        return mask_url_credentials(text)
    _mask(document)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _mask(node: Any) -> None:
    if isinstance(node, dict):
        for key in list(node):
            value = node[key]
            if isinstance(value, dict | list):
                _mask(value)
            elif isinstance(value, str):
                if is_secret_key(str(key)) and not _REFERENCE.fullmatch(value):
                    node[key] = MASK
                else:
                    node[key] = type(value)(mask_url_credentials(value)) if "://" in value else value
            elif value is not None and is_secret_key(str(key)):
                node[key] = MASK
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, dict | list):
                _mask(item)
            elif isinstance(item, str) and "://" in item:
                node[i] = mask_url_credentials(item)
