"""The C module ``ferry._arenas`` (Python's freed arenas kept for reuse, :mod:`ferry.arenas`); all
else is in pyproject.toml.

It is optional twice over: where it does not compile (no C compiler) the build goes on without it,
and ``FERRY_PURE_PYTHON=1`` leaves it out, for the pure-Python wheel (``py3-none-any``) that installs
everywhere: ``FERRY_PURE_PYTHON=1 python -m build --wheel``. ferry runs without it.
"""

import os

from setuptools import Extension, setup

PURE_PYTHON = os.environ.get("FERRY_PURE_PYTHON", "") not in ("", "0")

setup(
    ext_modules=[]
    if PURE_PYTHON
    else [Extension("ferry._arenas", sources=["src/ferry/_arenas.c"], optional=True)]
)
