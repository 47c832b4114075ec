"""The GPU models semsched knows. A job that asks for an unknown model is malformed.

Names follow the Alibaba GPU traces (``P100``, ``T4``, ``V100M16`` …) plus the
common data-centre parts. Operators extend the set with ``SEMSCHED_EXTRA_GPU_MODELS``
(comma-separated), read once at import.
"""

from __future__ import annotations

import os

BUILTIN_GPU_MODELS: frozenset[str] = frozenset(
    {
        # Alibaba GPU 2023 (openb) node list
        "P100", "T4", "V100M16", "V100M32", "A10", "G1", "G2", "G3",
        # common data-centre GPUs
        "K80", "P4", "P40", "V100", "A30", "A40", "A100", "A100-40G", "A100-80G",
        "L4", "L40", "L40S", "H20", "H100", "H200", "B200", "MI250", "MI300X",
    }
)  # fmt: skip


def known_gpu_models() -> frozenset[str]:
    extra = {m.strip() for m in os.environ.get("SEMSCHED_EXTRA_GPU_MODELS", "").split(",")}
    return BUILTIN_GPU_MODELS | {m for m in extra if m}


KNOWN_GPU_MODELS = known_gpu_models()
