"""Conversations, messages, runs and the run's step ledger."""

from .conversations import Conversation, ConversationShare, Message
from .runs import LlmTurn, Run, ToolInvocation

__all__ = ["Conversation", "ConversationShare", "LlmTurn", "Message", "Run", "ToolInvocation"]
