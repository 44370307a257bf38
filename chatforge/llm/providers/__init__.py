"""The adapters that speak each provider's wire format (``ChatProvider`` in
``base``): OpenAI-compatible chat completions and Responses, Anthropic,
Gemini, Ollama, and the scripted ``demo`` model. They know nothing of
Django: which adapter serves a model is ``chatforge/llm/resolution.py``'s
business, so a process without Django's apps (a benchmark, a test's bare
gevent process) can import any of them."""
