"""``semsched train``'s reinforcement-learning stage (:mod:`inference.training.rl`): after
imitation / DAgger (``--rl-episodes N``), or on an existing model directory without imitation
(``--rl-from DIR``). One rich progress bar advances per episode and a line per episode prints
the greedy rollout's allocation (the policy as deployed, before that episode's update) beside
the sampled rollouts'; the result goes into the model's ``train.json`` under ``"rl"``."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.console import wide_console

console = wide_console()


def rl_options(*, episodes: int, seeds: list[int], rate: float, temperature: float, samples: int,
               minutes: float | None, kl: float, state_rate: float, seed: int, baseline: str = "greedy",
               epochs: int = 3) -> Any:  # fmt: skip
    """:class:`RLOptions`, with the held-out seeds refused as a CLI error."""
    from inference.training.rl import RLOptions

    try:
        return RLOptions(episodes=episodes, seeds=tuple(seeds), lr=rate, temperature=temperature, samples=samples,
                         minutes=minutes, kl=kl, state_rate=state_rate, seed=seed, baseline=baseline,
                         epochs=epochs)  # fmt: skip
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def run_rl_stage(model: Any, node_views: list[Any], pod_list: list[Any], options: Any) -> tuple[Any, dict[str, Any]]:
    """Fine-tune ``model`` with a progress bar; returns the new model and the history (JSON)."""
    from inference.training.rl import RLEpisode, train_rl

    with Progress(TextColumn("[bold]rl"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[what]}"),
                  TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("rl", total=options.episodes, what="")
        episode = [0]

        def on_rollout(what: str) -> None:
            seed = options.seeds[episode[0] % len(options.seeds)]
            bar.update(task, what=f"episode {episode[0] + 1} seed {seed}: {what}")

        def on_episode(e: RLEpisode) -> None:
            episode[0] = e.episode + 1
            samples = " ".join(f"{v:.2f}" for v in e.samples)
            bar.console.print(f"episode {e.episode + 1} seed {e.seed}: greedy {e.greedy:.2f} %, sampled {samples} % "
                              f"(Δ vs greedy {sum(e.samples) / len(e.samples) - e.greedy:+.2f} pp), "
                              f"{e.states} states, KL {e.kl:.4f}, {e.seconds:.0f} s")  # fmt: skip
            bar.update(task, advance=1)

        model, history = train_rl(model, node_views, pod_list, options, on_episode=on_episode, on_rollout=on_rollout)
    out = history.to_json()
    console.print(f"rl: {len(history.episodes)} episode(s) in {history.seconds:.0f} s (stopped: {history.stopped}); "
                  f"mean greedy {out['mean_greedy']}, mean sampled {out['mean_sampled']}")  # fmt: skip
    return model, out


def run_train_rl_from(source: Path, *, options: Any, out: Path, version: str | None, pods: Path | None = None,
                      nodes: Path | None = None) -> Path:  # fmt: skip
    """Load ``source`` (a model directory), fine-tune it, write ``<out>/<version>/`` with the
    source's ``train.json`` extended by ``"rl"``."""
    import torch

    from inference.model.io import load_model, save_new_model
    from ops.cli.train import fill_inputs_or_exit

    torch.set_num_threads(1)  # small ops on a shared machine
    started = time.perf_counter()
    try:
        loaded = load_model(source)
    except Exception as e:  # noqa: BLE001 - any model that does not load (a corrupt model.pt, weights that do
        raise typer.BadParameter(f"--rl-from {source}: {type(e).__name__}: {e}") from None  # not fit): one line
    train_json = Path(source) / "train.json"
    info: dict[str, Any] = json.loads(train_json.read_text()) if train_json.exists() else {}
    # the source's own validation seeds (found by review: only the CLI's --val-seeds were checked)
    if clash := sorted(set(info.get("val_seeds") or ()) & set(options.seeds)):
        raise typer.BadParameter(f"--rl-seeds {clash} validated {loaded.version} (its train.json): fine-tune on others")
    node_views, pod_list = fill_inputs_or_exit(pods, nodes)
    model, rl = run_rl_stage(loaded.model, node_views, pod_list, options)
    generated = version is None
    version = version or f"rl-{loaded.version}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    # the source's own record stays whole (a fine-tune of a fine-tune kept only the last one's seeds, and
    # promotion's leak check read the others nowhere: found by review)
    earlier = {k: info[k] for k in ("rl", "rl_from") if k in info}
    info = info | {"version": version, "rl_from": {"version": loaded.version, "path": str(loaded.path), **earlier},
                   "method": (info.get("method") or "(untrained)") + " + RL fine-tuning (self-critical PPO)",
                   "rl": rl, "total_seconds": time.perf_counter() - started}  # fmt: skip
    directory = save_new_model(out, model, version, info, generated=generated)
    console.print(f"wrote {directory}")
    return directory
