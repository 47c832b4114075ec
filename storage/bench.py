"""Writer throughput: ``python -m storage.bench [--rows 100000] [--batch 5000] [--dsn DSN]``.

Builds ``rows`` JobSubmitted events, then times (a) events → Arrow (``rows.to_arrow``) and
(b) the inserts, in batches of ``batch`` rows, into a fresh chdb directory (default) or
the given DSN. Prints rows/s for the conversion, the insert and the two together.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime

from scheduling.events import JobSubmitted
from storage.client import close_client, get_client
from storage.migrate import migrate
from storage.rows import to_arrow


def run(rows: int, batch: int, dsn: str | None = None) -> dict[str, float]:
    """Run the benchmark; returns rows/s for ``convert``, ``insert`` and ``total``."""
    dsn = dsn or f"chdb://{tempfile.mkdtemp(prefix='semsched-bench-')}"
    client = get_client(dsn)
    try:
        migrate(client)
        events = [
            JobSubmitted(job_id=f"job-{i}", cluster=f"c{i % 4}", tenant=f"t{i % 50}", cpu_milli=1000 + i % 7000,
                         memory_mib=2048, num_gpu=i % 3, labels={"team": f"team{i % 10}"},
                         runtime_estimate_s=float(i % 3600))
            for i in range(rows)
        ]  # fmt: skip
        t_conv = t_ins = 0.0
        now = datetime.now(UTC)
        for start in range(0, rows, batch):
            chunk = events[start : start + batch]
            t0 = time.perf_counter()
            table = to_arrow("jobs_submitted", chunk, [(0, start + i) for i in range(len(chunk))], now)
            t1 = time.perf_counter()
            client.insert_arrow("jobs_submitted", table)
            t2 = time.perf_counter()
            t_conv += t1 - t0
            t_ins += t2 - t1
        _, [(n,)] = client.query_rows("SELECT count() FROM jobs_submitted FINAL")
        assert int(n) == rows, (n, rows)
        return {"convert": rows / t_conv, "insert": rows / t_ins, "total": rows / (t_conv + t_ins)}
    finally:
        close_client(dsn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--dsn", default=None)
    a = ap.parse_args()
    r = run(a.rows, a.batch, a.dsn)
    print(f"{a.rows} JobSubmitted in batches of {a.batch}: "
          f"convert {r['convert']:,.0f} rows/s, insert {r['insert']:,.0f} rows/s, "
          f"end-to-end {r['total']:,.0f} rows/s")  # fmt: skip


if __name__ == "__main__":
    main()
