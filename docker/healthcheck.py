"""The image's HEALTHCHECK: what "healthy" means depends on the command the container runs.

- ``ferry serve``: its API answers ``GET /healthz`` with 200 (on its ``--port``, else its server
  file's ``api.port``);
- ``ferry run JOB``: the pipeline's status port answers ``GET /healthz`` with 200 when the job sets
  ``pipeline.status.port`` (with ``FERRY_STATUS_HOST=0.0.0.0``, as the image sets); without a status
  port there is nothing to ask, and the container is healthy while its process runs;
- ``ferry worker`` serves no HTTP of its own: healthy while its process runs.

``FERRY_HEALTH_URL``, when set, is asked instead, whatever the command.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path


def health_url(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The URL that tells whether the container running ``argv`` is healthy, or None (its process
    running is all there is to know)."""
    if env.get("FERRY_HEALTH_URL"):
        return env["FERRY_HEALTH_URL"]
    words = list(argv[1:])
    # the first of the roles named (the main group's options, such as --log-level DEBUG, come before)
    command = next((w for w in words if w in ("serve", "run", "worker")), None)
    if command == "serve":
        return f"http://127.0.0.1:{api_port(words[words.index('serve') + 1 :], env)}/healthz"
    if command == "run":
        port = status_port(words[words.index("run") + 1 :], env)
        return None if port is None else f"http://127.0.0.1:{port}/healthz"
    return None


def api_port(args: Sequence[str], env: Mapping[str, str]) -> int:
    """The port ``ferry serve`` listens on: its ``--port``, else its server file's ``api.port``."""
    # imported here: the check of a worker, every 15 s, needs none of ferry
    from ferry.cli.control import serve  # noqa: PLC0415
    from ferry.control.config import load_server_config  # noqa: PLC0415

    with serve.make_context("serve", list(args), resilient_parsing=True) as context:
        port, config = context.params.get("port"), context.params.get("config_path")
    if port is None:
        port = load_server_config(Path(config), env=dict(env)).api.port if config is not None else 8080
    return int(port)


def status_port(args: Sequence[str], env: Mapping[str, str]) -> int | None:
    """``pipeline.status.port`` of the job file ``ferry run`` was given (its arguments read as
    ``ferry run`` reads them)."""
    from ferry.cli.main import run  # noqa: PLC0415
    from ferry.config.loader import load_job  # noqa: PLC0415

    with run.make_context("run", list(args), resilient_parsing=True) as context:
        job = context.params.get("job")
    return None if job is None else load_job(Path(job), env=dict(env)).pipeline.status_port


def main() -> int:
    argv = Path("/proc/1/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
    # the entrypoint runs as `python /opt/ferry/bin/ferry ...`: what follows the script is the command
    argv = next((argv[i:] for i, a in enumerate(argv) if Path(a).name == "ferry"), argv)
    url = health_url(argv, os.environ)
    if url is None:
        return 0
    with urllib.request.urlopen(url, timeout=4) as response:
        return 0 if response.status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
