"""The event and schema model: types, schemas, data and schema-change events, their pure functions.

It imports only the standard library, :mod:`ferry.exceptions` and :mod:`ferry.offsets`: the
pipeline, the sources, the sinks, the state and the configuration all speak it.
"""
