"""How the web process serves requests (platform layer): the ASGI handler
that runs a sync view in one hop, middleware that works for sync and async
views alike, and the fixed set of request threads (decision 0030)."""
