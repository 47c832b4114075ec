"""``semsched bench triton --burst N``: a worker's step through Triton when N jobs wait at once.

The worker awaits the step's first model call (``prepare_step``: the first window, 256 jobs that fit
somewhere; the event loop keeps serving meanwhile), then runs ``schedule_step``, in which every job
past that window that reaches scoring opens the next window with a *blocking* call
(:mod:`inference.step_windows`): the event loop (heartbeats, agents, ``/status``) waits for it. Each
step here is that, on the 1,213 openb nodes ~70 % allocated, with the first N openb pods pending,
twice: as the worker runs it (its step deadline, ``SEMSCHED_TRITON_STEP_DEADLINE_MS``, whose
remainder bounds the later windows together, :mod:`inference.step_budget`; its hold,
``SEMSCHED_STEP_HOLD``, past which the step leaves the jobs it has not considered to the next one)
and with neither (each later window bounded by its own call deadline only, every job decided in the
one step: as before both).

Columns: **prepared** = ``prepare_step`` (awaited, not blocking); **blocking** = ``schedule_step``
(the later windows' calls, the filters, the in-step re-scoring), **of it in calls** = the later
windows' calls (texts, inputs, the round trip); **windows** = the step's model calls; **placed**,
**deferred** (to the next step, by the hold) and **by the fallback** = the step's placements, the
jobs it left, and the placements the fallback heuristic decided once the deadline was spent (or a
call failed).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from ops.bench import percentiles


def burst_rows(model_dir: Path, url: str, snap: Any, pods: list[Any], burst: int, repeat: int,
               progress: Any = None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per step deadline (the worker's, then none): the steps' latencies and who placed what."""
    from inference.policy import LearnedPolicy
    from inference.serving.client import TritonBackend
    from scheduling.assign import schedule_step
    from streams.settings import Settings

    jobs = [pods[i % len(pods)] for i in range(burst)]
    now = max(j.submit_time for j in jobs)
    default = TritonBackend(model_dir, url=url).step_deadline_ms  # (the environment's, as the worker reads it)
    hold = Settings().step_hold_s or None  # (SEMSCHED_STEP_HOLD, as the worker reads it)
    rows = []
    for step_deadline, hold_s in ((default, hold), (0.0, None)):
        policy = LearnedPolicy(model_dir, backend="triton", backend_kwargs={"url": url, "step_deadline_ms": step_deadline})
        if policy.fell_back:
            raise RuntimeError(f"the learned policy could not open its backend: {policy.fallback_reason}")
        loop = asyncio.new_event_loop()
        samples: dict[str, list[float]] = {"prepared": [], "blocking": [], "calls": [], "windows": [], "placed": [],
                                           "deferred": [], "fallback": []}  # fmt: skip
        reasons: set[str] = set()
        try:
            for r in range(repeat + 1):  # (the first: a warm-up)
                s = snap.copy()
                ordered = policy.queue_order(jobs, now)
                t0 = time.perf_counter()
                loop.run_until_complete(policy.prepare_step(s, ordered, now))
                t1 = time.perf_counter()
                result = schedule_step(s, ordered, policy, now=now, in_order=True, hold_s=hold_s)
                t2 = time.perf_counter()
                budget = policy.windows.budget
                if progress is not None:
                    progress()
                if not r:
                    continue
                placed = {p.job_id for p in result.placements}
                in_step = budget.spent_ms - budget.first_ms if budget is not None else 0.0  # the windows' calls
                for key, value in (("prepared", (t1 - t0) * 1000.0), ("blocking", (t2 - t1) * 1000.0), ("calls", in_step),
                                   ("windows", len(policy.windows.calls)), ("placed", len(placed)),
                                   ("deferred", len(result.deferred)),
                                   ("fallback", len(placed & policy.fallback_jobs))):  # fmt: skip
                    samples[key].append(float(value))
                if policy.last_step.fallback:
                    reasons.add(policy.last_step.reason)
        finally:
            policy.close()
            loop.close()
        prepared, blocking = percentiles(samples["prepared"]), percentiles(samples["blocking"])
        rows.append({"step deadline": f"{step_deadline:g} ms" if step_deadline else "none",
                     "hold": f"{hold_s:g} s" if hold_s else "none", "pending": burst,
                     "prepared p50 ms": prepared["p50"], "blocking p50 ms": blocking["p50"],
                     "blocking p99 ms": blocking["p99"], "blocking max ms": max(samples["blocking"]),
                     "of it in calls p50 ms": percentiles(samples["calls"])["p50"],
                     "windows": float(np.mean(samples["windows"])), "placed": float(np.mean(samples["placed"])),
                     "deferred": float(np.mean(samples["deferred"])),
                     "by the fallback": float(np.mean(samples["fallback"])), "n": len(samples["blocking"]),
                     "why": "; ".join(sorted(reasons))[:300]})  # fmt: skip
    return rows


BURST_NOTE = " ".join((__doc__ or "").split("\n\n", 1)[1].split())  # (the report's text: the docstring past its title)
BURST_COLUMNS = ["step deadline", "hold", "pending", "prepared p50 ms", "blocking p50 ms", "blocking p99 ms", "blocking max ms",
                 "of it in calls p50 ms", "windows", "placed", "deferred", "by the fallback", "n", "why"]  # fmt: skip
