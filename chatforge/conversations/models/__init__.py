"""Conversations, messages, runs and the run's step ledger."""

from .conversations import Conversation, Message
from .runs import LlmTurn, Run, ToolInvocation

__all__ = ["Conversation", "LlmTurn", "Message", "Run", "ToolInvocation"]
