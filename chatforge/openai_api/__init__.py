"""An OpenAI-compatible Chat Completions API over ChatForge runs
(``/v1/chat/completions``, ``/v1/models``): stock OpenAI clients chat with
ChatForge, and the server runs the tools."""
