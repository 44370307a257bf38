"""ChatForge settings, split by concern. Everything comes from the environment
through ``chatforge.settings.env``; nothing here needs editing to deploy."""

from .api import *  # noqa: F401,F403
from .base import *  # noqa: F401,F403
from .database import *  # noqa: F401,F403
from .engine import *  # noqa: F401,F403
from .files import *  # noqa: F401,F403
from .logging import *  # noqa: F401,F403
from .observability import *  # noqa: F401,F403
from .queues import *  # noqa: F401,F403
from .realtime import *  # noqa: F401,F403
from .sandbox import *  # noqa: F401,F403
from .secrets import *  # noqa: F401,F403
from .security import *  # noqa: F401,F403
from .tools import *  # noqa: F401,F403
