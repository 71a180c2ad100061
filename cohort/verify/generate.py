"""Compatibility name for the generator package `cohort.verify.gen` (split out of this
module). fuzz.py imports from here until the fuzz package imports `gen` directly;
new code imports `cohort.verify.gen`."""
from .gen import *  # noqa: F401,F403
from .gen import __all__  # noqa: F401
