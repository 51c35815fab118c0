"""The targets tilegen accepts: tileiras's ``--gpu-name`` choices (``tileiras --help``, CUDA
13.5). A leaf module, so the CLI's ``--help`` imports nothing of the compiler."""

GPU_NAMES = (
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_88",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_103",
    "sm_107",
    "sm_110",
    "sm_120",
    "sm_121",
)
