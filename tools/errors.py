"""Exceptions a tool handler raises to say how it failed.

Every failure reaches the model as a tool result, never as a crash of the run.
What differs is what the model (and the executor) should do next, so the
class says whose fault the failure is:

* ``ToolArgumentError`` - the model's fault: it can call again with other
  arguments, and the error text tells it so.
* ``TransientToolError`` - nobody's fault: an outside service hiccuped, and the
  executor may retry, within the tool's policy.
* ``ToolError`` - final: retrying with the same or other arguments will not help.

Any other exception is treated as a bug in the handler: final, reported with its
class name so the model can at least tell the user something went wrong.
"""

from __future__ import annotations


class ToolError(Exception):
    """A final tool failure; ``str(exc)`` is shown to the model."""


class ToolArgumentError(ToolError):
    """The arguments were wrong in a way the model can fix by calling again."""


class TransientToolError(ToolError):
    """A failure that may go away if the same call is retried (network, 5xx, ...)."""
