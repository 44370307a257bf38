"""Channels' ``WebsocketCommunicator``, importable without daphne.

``channels.testing``'s ``__init__`` imports its live-server test case, which
needs daphne; ChatForge serves with uvicorn and does not install it. The
communicators themselves only need asgiref, so when daphne is missing the
package is registered bare (no ``__init__``) and the communicator module is
imported from it as usual.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

try:
    from channels.testing import WebsocketCommunicator
except ModuleNotFoundError as exc:
    if exc.name is None or not exc.name.startswith("daphne"):
        raise
    import channels

    sys.modules.pop("channels.testing", None)
    package = types.ModuleType("channels.testing")
    package.__path__ = [str(Path(channels.__file__).parent / "testing")]
    sys.modules["channels.testing"] = package
    from channels.testing.websocket import WebsocketCommunicator

__all__ = ["WebsocketCommunicator"]
