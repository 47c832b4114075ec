"""Which model a benchmark's learned policies place with, or why they cannot.

A benchmark never reports the fallback heuristic's numbers under the learned policy's name:
``semsched bench fill|trace|sweep|step`` refuse, before running anything, a learned policy
named on the command line whose model does not load (the learned orderings' duration model
too), and name the version that does in the report; their default list (every registered placement) leaves the learned ones out then, and
says so (``ops/cli/bench.py``). Nor another version's: each runs with the model directory resolved
at its start (:func:`model_pinned`), whatever ``latest`` does meanwhile.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

LEARNED_ORDERINGS = ("sjf-learned", "gittins-learned")


def duration_model_problem(policies: Sequence[str]) -> str | None:
    """Why an ordering on the learned duration model (``sjf-learned+…``, ``gittins-learned+…``)
    among ``policies`` would run as ``sjf-predicted`` (its model does not load), else ``None``."""
    if not any(p.partition("+")[0] in LEARNED_ORDERINGS for p in policies if "+" in p):
        return None
    from inference.duration.ordering import SjfLearned

    probe = SjfLearned()
    if not probe.fell_back:
        return None
    return (f"the learned duration model at {probe.model_dir} does not load ({probe.fallback_reason}), so "
            f"{' and '.join(LEARNED_ORDERINGS)} would order as sjf-predicted; train one (semsched train-duration) "
            "or point SEMSCHED_DURATION_MODEL_DIR at one")  # fmt: skip


def learned_version(policies: Sequence[str]) -> tuple[str | None, str | None]:
    """``(model version, None)`` when a policy places with the learned model and its model
    loads; ``(None, why)`` when it does not load, or when a learned ordering's duration model
    does not (:func:`duration_model_problem`); ``(None, None)`` when no policy is learned."""
    from inference.policy import LearnedPolicy, uses_learned

    if (why := duration_model_problem(policies)) is not None:
        return None, why
    if not any(uses_learned(p) for p in policies):
        return None, None

    probe = LearnedPolicy()
    if probe.fell_back:
        return None, (f"the learned policy has no model at {probe.model_dir} ({probe.fallback_reason}); "
                      "train one (semsched train) or point SEMSCHED_MODEL_DIR (bench sweep: --model) at one")  # fmt: skip
    return probe.model_version, None




def seen_fill_seeds(seeds: Sequence[int]) -> list[int]:
    """The fill ``seeds`` the learned policy's model (``$SEMSCHED_MODEL_DIR``, as pinned) was trained
    or validated on, from its ``train.json`` (:func:`inference.training.promotion.trained_seeds`):
    its numbers on them are inflated (found by review: ``bench fill`` on training seeds said nothing)."""
    from inference.policy import default_model_dir
    from inference.training.promotion import model_meta, trained_seeds

    try:
        _, _, train = model_meta(default_model_dir())
    except (OSError, ValueError, KeyError):
        return []
    return sorted(trained_seeds(train) & set(seeds))


def duration_trained_on(policies: Sequence[str], trace: str) -> str | None:
    """Why the learned orderings' numbers on a replay of ``trace`` are inflated, else ``None``: their
    duration model learned from that very trace's jobs (its ``train_info``), whose run times its retrieval
    index holds and hands back (found by review: ``bench trace``/``sweep`` said nothing, as ``bench fill``
    once said nothing of the placement model's training seeds). ``bench sjf`` replays only the part after
    the model's cut, and is the benchmark of the learned orderings."""
    if not any(p.partition("+")[0] in LEARNED_ORDERINGS for p in policies if "+" in p):
        return None
    from inference.duration.ordering import SjfLearned

    probe = SjfLearned()
    info = getattr(getattr(probe.predictor, "config", None), "train_info", None) or {}
    if probe.fell_back or info.get("trace") != trace:
        return None
    cut = info.get("cut_s")
    learned = f"its jobs submitted before {cut:,.0f} s" if cut is not None else "all of its jobs"
    return (f"duration model {probe.model_version} learned from this trace ({learned}), and its retrieval "
            f"index returns their run times: {' and '.join(LEARNED_ORDERINGS)}'s numbers here are inflated "
            "(semsched bench sjf replays only what a model has not seen)")


def duration_version(policies: Sequence[str]) -> str | None:
    """The duration model's version when an ordering of ``policies`` uses it (``sjf-learned+…``,
    ``gittins-learned+…``) and it loads, else ``None``: for the report to name it, as it names the
    placement model's (found by review: a report never said which duration model ordered its jobs)."""
    if not any(p.partition("+")[0] in LEARNED_ORDERINGS for p in policies if "+" in p):
        return None
    from inference.duration.ordering import SjfLearned

    return SjfLearned().model_version


@contextlib.contextmanager
def pinned_model(model: Path | None) -> Iterator[Path]:
    """For the duration of a benchmark, ``$SEMSCHED_MODEL_DIR`` = the model directory resolved
    now (``models/latest`` → its version's directory): every ``learned`` run of it loads the
    same version, the one its report names, even if ``latest`` is repointed meanwhile. The duration
    model's directory (``$SEMSCHED_DURATION_MODEL_DIR``) likewise, for the learned orderings (found
    by review: each of a report's rows loaded ``models/duration/latest`` as it was then)."""
    from inference.duration.ordering import MODEL_DIR_ENV as DURATION_DIR_ENV
    from inference.duration.ordering import default_model_dir as default_duration_dir
    from inference.policy import MODEL_DIR_ENV, default_model_dir

    target = Path(model) if model is not None else default_model_dir()
    target = target.resolve() if target.exists() else target
    duration = default_duration_dir()
    pins = {MODEL_DIR_ENV: target, DURATION_DIR_ENV: duration.resolve() if duration.exists() else duration}
    before = {name: os.environ.get(name) for name in pins}
    os.environ.update({name: str(path) for name, path in pins.items()})
    try:
        yield target
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def model_pinned(run: Callable[..., int]) -> Callable[..., int]:
    """``run`` (a benchmark) inside :func:`pinned_model` of its ``model_dir`` keyword, if any (found by
    review: bench fill, trace, step and learned followed ``latest`` mid-run and named the first version)."""

    @functools.wraps(run)
    def pinned(*args: Any, **kwargs: Any) -> int:
        with pinned_model(kwargs.get("model_dir")) as model_dir:
            if "model_dir" in kwargs:
                kwargs["model_dir"] = model_dir
            return run(*args, **kwargs)

    return pinned
