"""Rich rendering of the archive's summary and reconciliation (the demo's last screen)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from storage.queries import Reconciliation, Summary


def _fmt(v: float | None, unit: str, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f} {unit}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1%}"


def _spark(values: list[float]) -> str:
    bars = "▁▂▃▄▅▆▇█"
    return "".join(bars[min(len(bars) - 1, int(v * len(bars)))] for v in values)


def _by_reason(title: str, unit: str, counts: dict[str, int], most: int = 5, key: str = "reason") -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column(unit, justify="right")
    t.add_column(key)
    for reason, n in list(counts.items())[:most]:
        t.add_row(f"{n:,}", reason)
    if len(counts) > most:
        t.add_row(f"{sum(list(counts.values())[most:]):,}", f"… {len(counts) - most} more")
    return t


def print_summary(console: Console, s: Summary, *, wall_s: float) -> None:
    t = Table(title="semsched run — from the ClickHouse archive", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(justify="right")
    for label, value in [
        ("submitted", f"{s.submitted:,}"),
        ("placed", f"{s.placed:,}"),
        ("finished", f"{s.finished:,}"),
        ("failed attempts", f"{s.failed:,}"),
        ("rejected", f"{s.rejected:,}"),
        ("still running", f"{s.running:,}"),
        ("JCT mean / p95 (wall clock)", f"{_fmt(s.jct_mean_s, 's')} / {_fmt(s.jct_p95_s, 's')}"),
        ("queueing delay mean", _fmt(s.queueing_delay_mean_s, "s", 2)),
        ("decision latency p50 / p99", f"{_fmt(s.decision_latency_p50_ms, 'ms')} / "
                                       f"{_fmt(s.decision_latency_p99_ms, 'ms')}"),
        ("dead letters", f"{sum(s.deadletters_by_reason.values()):,}"),
        ("wall time", f"{wall_s:,.0f} s"),
    ]:  # fmt: skip
        t.add_row(label, value)
    console.print(t)
    for title, unit, counts, key in (("rejected, by reason", "jobs", s.rejected_by_reason, "reason"),
                                     ("jobs that had to wait for a node, by their last reason", "jobs",
                                      s.unschedulable_by_reason, "reason"),
                                     ("dead letters, by reason", "messages", s.deadletters_by_reason, "reason"),
                                     ("placements, by the model that decided them", "placements",
                                      s.placed_by_model, "model version")):  # fmt: skip
        if counts:
            console.print(_by_reason(title, unit, counts, key=key))
    if s.gpu_allocation:
        ratios = [x.ratio for x in s.gpu_allocation]
        step = s.gpu_allocation[1].bucket_start - s.gpu_allocation[0].bucket_start if len(ratios) > 1 else 0
        console.print(f"[bold]GPU allocation over time[/] (share of {s.gpu_allocation[0].capacity_milli / 1000:,.0f} "
                      f"GPUs held, mean per {step:g} s): {_spark(ratios)}  peak {max(ratios):.1%}, "
                      f"mean {_pct(s.gpu_allocation_mean)}")  # fmt: skip


def _job(item: tuple[str, str] | tuple[str, str, int]) -> str:
    """A reconciliation entry, ``(cluster, job_id)`` or ``(cluster, job_id, attempt)``, as
    ``cluster/job_id`` (``attempt N``): a job id is unique only within a cluster."""
    cluster, job_id, *attempt = item
    return escape(f"{cluster}/{job_id}" + (f" attempt {attempt[0]}" if attempt else ""))


def print_reconcile(console: Console, r: Reconciliation, *, submitted: int) -> bool:
    if r.ok:
        console.print(f"[bold green]reconciled:[/] every one of the {submitted:,} submitted jobs is finished, "
                      "running, or rejected with a reason; none was placed, started or run twice, or run "
                      "after it was done")  # fmt: skip
        return True
    console.print("[bold red]NOT reconciled[/]")
    for label, items in (("unaccounted (lost)", r.unaccounted), ("placed twice", r.placed_twice),
                         ("started twice", r.started_twice),
                         ("ran twice (an earlier attempt still running)", r.ran_twice),
                         ("ran after it was done (finished or rejected)", r.ran_after_done)):  # fmt: skip
        if items:
            console.print(f"  {label}: {len(items)}: {', '.join(map(_job, items[:10]))}"
                          + (" …" if len(items) > 10 else ""))  # fmt: skip
    return False
