"""The software float formats moved to :mod:`tilegen.runtime.floats` (codegen uses them too, and
codegen must not import the interpreter). This name stays for code written against the old path;
new code imports ``tilegen.runtime.floats``."""

from tilegen.runtime.floats import *  # noqa: F401,F403
