"""ferry: change-data-capture pipelines from Kafka into lakehouse and warehouse tables.

The import package is ``ferry``; it is distributed as ``ferry-cdc`` (``pip install 'ferry-cdc[iceberg]'``).
"""

#: The name ferry is published under (the extras are installed as ``ferry-cdc[<extra>]``).
DISTRIBUTION = "ferry-cdc"


def version() -> str:
    """The installed distribution's version (``0+unknown`` when run from a tree never installed)."""
    from importlib import metadata  # noqa: PLC0415 - only ``ferry --version`` asks

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # pragma: no cover - the package is installed to run
        return "0+unknown"


def install_hint(extra: str) -> str:
    """The command that installs ``extra``, as error messages name it."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
