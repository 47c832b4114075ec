"""The DAG benches' shared CLI options default to the held-out DAG set's own defaults."""

from __future__ import annotations

import ops.cli.dag_set_options as o
from ops.bench.dag import HeldOutDagSet


def test_cli_defaults_are_the_held_out_sets():
    d = HeldOutDagSet()
    cli = (o.DAGS, o.SEED, o.TASKS_MIN, o.TASKS_MAX, o.PROCESSORS, o.CCR, o.BETA)
    assert cli == (d.dags, d.seed, d.tasks_min, d.tasks_max, d.processors, d.ccr, d.beta)
    assert o.held_out_flags(5, 1, 20, 40, 3, 0.5, 1.0) == (
        "--dags 5 --seed 1 --tasks-min 20 --tasks-max 40 --processors 3 --ccr 0.5 --beta 1")
