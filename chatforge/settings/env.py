"""The one place that reads the process environment.

Every setting ChatForge takes from the environment goes through ``env`` so
that names, types and defaults are declared once (see the configuration table
in the README).
"""

from __future__ import annotations

import environ

env = environ.Env()
