"""The control plane: pipelines as named resources with phases, savepoints, carry-over offsets and
replays (SPEC §3, §4).

:mod:`ferry.control.store` keeps pipelines and savepoints in the state store,
:mod:`ferry.control.service` holds every operation (the HTTP API and the CLI call it), and
:mod:`ferry.control.supervisor` is the worker loop that runs, stops and savepoints pipelines.
"""
