"""PNG plots for reports (matplotlib, headless Agg backend): lines, CDFs and bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def line_plot(path: Path, title: str, xlabel: str, ylabel: str,
              series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> Path:  # fmt: skip
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, (xs, ys) in series.items():
        marker = "o" if len(xs) <= 12 else None
        ax.plot(list(xs), list(ys), label=label, marker=marker, linewidth=1.4)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    return _save(fig, path)


def cdf_plot(path: Path, title: str, xlabel: str, samples: Mapping[str, Sequence[float]], *,
             log_x: bool = False) -> Path:  # fmt: skip
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, values in samples.items():
        xs = np.sort(np.asarray(values, dtype=float))
        if len(xs) == 0:
            continue
        ys = np.arange(1, len(xs) + 1) / len(xs)
        ax.step(xs, ys, where="post", label=label, linewidth=1.4)
    if log_x:
        ax.set_xscale("symlog", linthresh=1.0)
    ax.set(title=title, xlabel=xlabel, ylabel="fraction of jobs")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    if len(samples) > 1:
        ax.legend(fontsize=8)
    return _save(fig, path)


def bar_plot(path: Path, title: str, ylabel: str, values: Mapping[str, float], *,
             reference: Mapping[str, float] | None = None) -> Path:  # fmt: skip
    labels = list(values)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(labels) + 2), 4.2))
    x = np.arange(len(labels))
    width = 0.4 if reference else 0.7
    ax.bar(x - (width / 2 if reference else 0), [values[k] for k in labels], width, label="semsched")
    if reference:
        ax.bar(x + width / 2, [reference.get(k, np.nan) for k in labels], width, label="reference")
        ax.legend(fontsize=8)
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    ax.set(title=title, ylabel=ylabel)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)
