"""Upward / downward ranks and critical paths on hand-made DAGs and Topcuoglu's graph."""

from __future__ import annotations

import numpy as np
import pytest
from dag_builders import diamond_problem

from scheduling.dag import DagProblem
from scheduling.dag.ranks import cpop_priorities, critical_path, downward_ranks, heft_upward_ranks
from scheduling.dag.schedulers.cpop import cpop_critical_path


def test_ranks_on_a_diamond_by_hand() -> None:
    p = diamond_problem()
    assert heft_upward_ranks(p).tolist() == pytest.approx([12, 3.5, 8, 1])
    assert downward_ranks(p.graph, p.mean_costs(), p.mean_comm_costs()).tolist() == pytest.approx([0, 5, 4, 11])
    assert cpop_priorities(p).tolist() == pytest.approx([12, 8.5, 12, 12])
    assert cpop_critical_path(p, cpop_priorities(p)) == [0, 2, 3]


def test_topcuoglu_ranks_match_the_paper(topcuoglu: DagProblem) -> None:
    # Topcuoglu et al. 2002, Table 2 (rank_u) and Fig. 5 (CPOP: |CP| = 108, path n1 n2 n9 n10)
    expected = [108.000, 77.000, 80.000, 80.000, 69.000, 63.333, 42.667, 35.667, 44.333, 14.667]
    assert np.round(heft_upward_ranks(topcuoglu), 3).tolist() == expected
    prio = cpop_priorities(topcuoglu)
    assert prio[0] == pytest.approx(108.0)
    assert [topcuoglu.graph.names[i] for i in cpop_critical_path(topcuoglu, prio)] == ["n1", "n2", "n9", "n10"]


def test_critical_path_follows_the_weights_given() -> None:
    p = diamond_problem()
    zero = np.zeros(p.graph.n_edges)
    assert critical_path(p.graph, np.array([1.0, 9.0, 2.0, 1.0]), zero) == [0, 1, 3]
    assert critical_path(p.graph, np.array([1.0, 2.0, 2.0, 1.0]), zero) == [0, 1, 3]  # tie: lower index
    assert critical_path(p.graph, np.array([1.0, 2.0, 2.0, 1.0]), np.array([0, 0, 0, 5.0])) == [0, 2, 3]
