"""The targets tilegen accepts (runtime/targets.py, the one rule): tileiras 13.5's ``--gpu-name``
choices and their ``a``/``f`` variants. A leaf module, so the CLI's ``--help`` imports nothing of
the compiler."""

from tilegen.runtime.targets import GPU_NAMES, TARGET_NAMES, Target, target_from_name

__all__ = ["GPU_NAMES", "TARGET_NAMES", "Target", "target_from_name"]
