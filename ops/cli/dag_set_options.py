"""The typer options of the held-out random DAG set (``ops.bench.dag.HeldOutDagSet``), shared by
``semsched bench dag`` and ``semsched bench dag-bounds``: the same flags, defaults and help."""

from __future__ import annotations

from typing import Annotated

import typer

# the defaults (HeldOutDagSet's)
DAGS, SEED, TASKS_MIN, TASKS_MAX, PROCESSORS, CCR, BETA = 100, 0, 20, 150, 4, 1.0, 0.5

Dags = Annotated[int, typer.Option(min=0, help="Held-out random DAGs (the first N of the seed's stream; 0: none, the workflows only).")]
Seed = Annotated[int, typer.Option(min=0, max=2**32 - 1, help="Seed of the held-out DAG stream.")]
TasksMin = Annotated[int, typer.Option("--tasks-min", help="Fewest tasks of a random DAG.")]
TasksMax = Annotated[int, typer.Option("--tasks-max", help="Most tasks of a random DAG.")]
Processors = Annotated[int, typer.Option(help="Processors of the random DAGs' platform.")]
Ccr = Annotated[float, typer.Option(min=0.0, max=1e6, help="Communication-to-computation ratio of the random DAGs.")]
Beta = Annotated[float, typer.Option(help="Processor heterogeneity of the random DAGs (Topcuoglu's beta, 0..2).")]


def held_out_flags(dags: int, seed: int, tasks_min: int, tasks_max: int, processors: int, ccr: float,
                   beta: float) -> str:  # fmt: skip
    """The options above as a command line (for the report's "command")."""
    return (f"--dags {dags} --seed {seed} --tasks-min {tasks_min} --tasks-max {tasks_max} "
            f"--processors {processors} --ccr {ccr:g} --beta {beta:g}")  # fmt: skip
