"""LLM providers and models, configured in the admin (environment variables
give defaults for deployments without rows).

A *provider* is an endpoint of one kind (OpenAI-compatible, OpenAI
Responses, Anthropic, Gemini, Ollama) with its key, encrypted at rest. A
*model* is the name clients send, mapped to a provider, the vendor's model
name and what it supports. Validation results record how reliably a model
uses tools: a model is validated once 80 % of its tests succeeded
(docs/providers.md, "Model validation").
"""

from __future__ import annotations

from django.db import models


class ProviderKind(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible Chat Completions"
    OPENAI_RESPONSES = "openai_responses", "OpenAI Responses API"
    ANTHROPIC = "anthropic", "Anthropic Messages"
    GEMINI = "gemini", "Google Gemini"
    OLLAMA = "ollama", "Ollama (native API)"


class Provider(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=ProviderKind.choices)
    base_url = models.CharField(max_length=500, blank=True, help_text="Blank: the vendor's usual endpoint.")
    # Fernet ciphertext (chatforge.accounts.crypto); never shown or returned.
    api_key_ciphertext = models.TextField(blank=True, editable=False)
    default_model = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"


class LanguageModel(models.Model):
    name = models.CharField(max_length=200, unique=True, help_text="What clients send as 'model'.")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="models")
    upstream_name = models.CharField(max_length=200, blank=True, help_text="The vendor's model name; blank: same as name.")
    supports_tools = models.BooleanField(default=True)
    supports_streaming = models.BooleanField(default=True)
    supports_reasoning = models.BooleanField(default=False, help_text="Accepts reasoning_effort.")
    supports_verbosity = models.BooleanField(default=False)
    supports_vision = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ModelValidation(models.Model):
    """One tool-calling test of a model (POST /api/tools/test)."""

    model = models.CharField(max_length=200, db_index=True)
    query = models.TextField()
    success = models.BooleanField()
    tool_calls = models.IntegerField(default=0)
    iterations = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    run = models.ForeignKey("conversations.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
