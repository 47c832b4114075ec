"""The worker's start-up heap, kept out of the garbage collector's full passes.

Once started (Faust, aiokafka, torch, the model, the recovered tables, the warmed-up policy) a
worker holds about 310,000 objects the collector tracks (the learned worker of the integration
tests), and a full collection walks all of them: the one before freezing takes 140–180 ms on
this machine, and such a pause lands on whichever step is running (in a benchmark process with
230,000 objects it was the slowest of 300 consecutive model steps, 78–99 ms against a p99 of
11). :func:`freeze_start_up_heap` collects once and moves the survivors to the permanent
generation that collections skip (``gc.freeze``); what the worker allocates later is collected
as before. The price: a start-up object that later becomes garbage in a reference cycle (the
first model version after a swap, say) is never freed — once, bounded by the start-up heap.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

log = logging.getLogger("semsched.loop")


def freeze_start_up_heap(stats: dict[str, Any]) -> None:
    """Collect, then freeze what survives; ``stats`` gets ``gc_frozen`` (objects) and ``gc_freeze_s``."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    stats["gc_frozen"] = gc.get_freeze_count()
    stats["gc_freeze_s"] = time.perf_counter() - t0
    log.info("froze %d start-up objects out of the collector's passes in %.0f ms", stats["gc_frozen"],
             stats["gc_freeze_s"] * 1000)  # fmt: skip
