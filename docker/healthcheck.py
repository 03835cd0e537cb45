"""The image's HEALTHCHECK: what "healthy" means depends on the command the container runs.

- ``ferry serve``: its API answers ``GET /healthz`` with 200 (``FERRY_API_PORT``, 8080 by default);
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
    words = [Path(argv[0]).name, *argv[1:]] if argv else []
    command = next((w for w in words[1:] if not w.startswith("-")), "serve" if words else None)
    if command == "serve":
        return f"http://127.0.0.1:{env.get('FERRY_API_PORT', '8080')}/healthz"
    if command == "run":
        port = status_port(words[words.index("run") + 1 :], env)
        return None if port is None else f"http://127.0.0.1:{port}/healthz"
    return None


def status_port(args: Sequence[str], env: Mapping[str, str]) -> int | None:
    """``pipeline.status.port`` of the job file ``ferry run`` was given (its arguments read as
    ``ferry run`` reads them)."""
    # imported here: the checks of `serve` and `worker`, every 15 s, need none of ferry
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
