"""The Django admin: one face of ChatForge, beside the REST API, the
websockets, ``/v1`` and the chat page (docs/architecture.md, "Layers").

Each domain's admin pages live here, one module per domain, not in the
domain's own package: they call the engine (running a tool by hand,
validating a model), which a domain package may not import.
"""
