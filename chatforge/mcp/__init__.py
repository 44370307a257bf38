"""MCP servers as tool sources.

Operators register remote Model Context Protocol servers in the admin; their
tools, discovered with ``tools/list`` and stored on the server's row, join
the catalog as ordinary ``tools.base.Tool`` objects named
``<server>__<tool>``, so the executor's timeouts, retries, redaction and
truncation apply to them as to every other tool. All protocol work is the
official ``mcp`` SDK's; this package only configures it (docs/mcp.md).
"""
