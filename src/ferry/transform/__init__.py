"""Transforms: Flink CDC's ``transform`` blocks, their SQL expressions compiled to closures, and the
function libraries they call (text, temporal, struct, variant, user-defined).

It imports only the event and schema model (:mod:`ferry.model`) and the Flink SQL front end
(:mod:`ferry.sql`), besides :mod:`ferry.exceptions`: the schemas it projects come from a lookup
(:class:`ferry.transform.blocks.SchemaLookup`), not from the pipeline's schema tracker.
"""
