"""Outbound HTTP for tools: an address guard against server-side request
forgery and a guarded client that applies it to every hop."""
