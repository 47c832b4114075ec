import numpy as np
import pytest

from scheduling.policies import (
    BasePolicy,
    Policy,
    UnknownPolicyError,
    available_policies,
    get_policy,
    register,
    unregister,
)


def test_builtin_policies_registered():
    assert {"fifo-first-fit", "best-fit"} <= set(available_policies())
    for name in ("fifo-first-fit", "best-fit"):
        p = get_policy(name)
        assert p.name == name and isinstance(p, Policy)


def test_unknown_policy_lists_available_ones():
    with pytest.raises(UnknownPolicyError) as e:
        get_policy("no-such-policy")
    msg = str(e.value)
    assert "unknown policy 'no-such-policy'" in msg
    assert "best-fit" in msg and "fifo-first-fit" in msg
    assert isinstance(e.value, LookupError)


def test_register_new_policy_and_duplicates():
    @register("test-constant")
    class Constant(BasePolicy):
        name = "test-constant"

        def __init__(self, value: float = 1.0) -> None:
            self.value = value

        def score(self, job, snapshot, feasible_mask):
            return np.full(snapshot.num_nodes, self.value)

    try:
        assert "test-constant" in available_policies()
        assert get_policy("test-constant", value=2.5).value == 2.5
        register("test-constant")(Constant)  # same factory again: fine
        with pytest.raises(ValueError, match="already registered"):
            register("test-constant")(lambda: Constant())
    finally:
        unregister("test-constant")
    assert "test-constant" not in available_policies()


def test_kwargs_reach_the_factory():
    p = get_policy("best-fit", gpu_weight=1, cpu_weight=0, memory_weight=0)
    assert p.weights == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        get_policy("best-fit", gpu_weight=0, cpu_weight=0, memory_weight=0)
