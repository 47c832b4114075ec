"""streams/web_address.py: the port file a worker leaves in its state directory."""

from __future__ import annotations

from pathlib import Path

from streams.web_address import PORT_FILE, advertise, advertised_port, withdraw


def test_advertise_read_and_withdraw(tmp_path: Path) -> None:
    assert advertised_port(tmp_path) is None
    advertise(tmp_path, 0)  # a worker without a web server says nothing
    assert advertised_port(tmp_path) is None
    advertise(tmp_path, 41234)
    assert advertised_port(tmp_path) == 41234
    withdraw(tmp_path, 50000)  # another worker's port: the file is not ours to remove
    assert advertised_port(tmp_path) == 41234
    withdraw(tmp_path, 41234)
    assert not (tmp_path / PORT_FILE).exists()
    (tmp_path / PORT_FILE).write_text("not a port\n")
    assert advertised_port(tmp_path) is None
