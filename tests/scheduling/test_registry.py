import pytest

from scheduling.registry import Registry, UnknownNameError


class Thing:
    def __init__(self, size: int = 1) -> None:
        self.size = size


def test_register_get_and_errors():
    reg: Registry[Thing] = Registry("thing", reserved="+")
    reg.register("a")(Thing)
    assert reg.names() == ["a"] and "a" in reg
    assert reg.get("a", size=3).size == 3
    reg.register("a")(Thing)  # the same factory again is fine
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(lambda: Thing())
    for bad in ("", " a", "x+y"):
        with pytest.raises(ValueError, match="invalid thing name"):
            reg.register(bad)
    with pytest.raises(UnknownNameError, match=r"unknown thing 'b'; available: a"):
        reg.get("b")
    reg.unregister("a")
    assert reg.names() == []
