"""The Makefile's venv rule, run by the real ``make`` in a copy of the Makefile with stand-ins for
``python3`` and the venv's python (nothing is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"
INSTALL = "-m pip install -q --retries 10 --resume-retries 20 -c constraints.txt -e .[dev]"

# `python3` (PYTHON=...): the version check passes; `-m venv [--clear] DIR` makes a venv whose python has pip
SYSTEM_PYTHON = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    for d; do :; done  # the last argument: the venv's directory
    rm -rf "$d" && mkdir -p "$d/bin"
    printf '#!/bin/sh\\necho "$*" >> "{venv_log}"\\n' > "$d/bin/python" && chmod +x "$d/bin/python"
fi
exit 0
"""
# what `python3 -m venv` leaves when ensurepip is missing (Debian without python3-venv): a python, no pip
NO_PIP_PYTHON = """#!/bin/sh
echo "$*" >> "{venv_log}"
echo "{python}: No module named pip" >&2
exit 1
"""


def _make_install(
    tmp_path: Path, venv_python: str | None, *make_args: str
) -> tuple[subprocess.CompletedProcess[str], str, str]:
    if shutil.which("make") is None:
        pytest.skip("no make here")
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "constraints.txt"):
        (tmp_path / name).write_text("")
    shutil.copy(MAKEFILE, tmp_path / "Makefile")
    log, venv_log = tmp_path / "python3.log", tmp_path / "venv-python.log"
    fake = tmp_path / "python3"
    fake.write_text(SYSTEM_PYTHON.format(log=log, venv_log=venv_log))
    fake.chmod(0o755)
    if venv_python is not None:
        (tmp_path / ".venv" / "bin").mkdir(parents=True)
        python = tmp_path / ".venv" / "bin" / "python"
        python.write_text(venv_python.format(venv_log=venv_log, python=python))
        python.chmod(0o755)
    result = subprocess.run(["make", "install", f"PYTHON={fake}", *make_args], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    return result, _read(log), _read(venv_log)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_venv_left_without_pip_is_made_again(tmp_path: Path) -> None:
    """Found by review: `test -x .venv/bin/python` kept a venv that ensurepip had failed to finish, and
    every later `make demo` failed on "No module named pip", also once python3-venv was installed."""
    result, system, venv = _make_install(tmp_path, NO_PIP_PYTHON)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-m venv --clear .venv" in system.splitlines()
    assert INSTALL in venv.splitlines()
    assert (tmp_path / ".venv" / ".installed").exists()


def test_a_venv_with_pip_is_kept(tmp_path: Path) -> None:
    result, system, venv = _make_install(tmp_path, '#!/bin/sh\necho "$*" >> "{venv_log}"\n')
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[0] for line in system.splitlines()] == ["-c"]  # only the version check ran
    assert "-m pip install -q --retries 10 --upgrade pip" in venv.splitlines()


def test_no_venv_yet_is_made(tmp_path: Path) -> None:
    result, system, venv = _make_install(tmp_path, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line for line in system.splitlines() if line.startswith("-m venv")] in (
        ["-m venv .venv"],
        ["-m venv --clear .venv"],
    )
    assert INSTALL in venv.splitlines()


# a venv python whose `pip install -e` fails (a download cut off) until its third try
FLAKY_PIP_PYTHON = """#!/bin/sh
echo "$*" >> "{venv_log}"
case "$*" in *" -e "*)
    n=$(grep -c -- " -e " "{venv_log}")
    [ "$n" -ge 3 ] || {{ echo "error: incomplete-download" >&2; exit 1; }} ;;
esac
exit 0
"""


def test_an_install_cut_off_is_tried_again_and_four_failures_stop_make(tmp_path: Path) -> None:
    """Found in CI: a torch CUDA wheel cut off at 128 of 228 MB failed the whole run (pip resumed it five
    times, all at once). The install is now tried up to four times, a pause apart."""
    result, _, venv = _make_install(tmp_path / "flaky", FLAKY_PIP_PYTHON, "PIP_RETRY_PAUSE=0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line for line in venv.splitlines() if " -e " in line] == [INSTALL] * 3
    assert result.stderr.count("pip install failed (attempt") == 2
    assert (tmp_path / "flaky" / ".venv" / ".installed").exists()
    failing = FLAKY_PIP_PYTHON.replace('-ge 3', '-ge 99')
    result, _, venv = _make_install(tmp_path / "down", failing, "PIP_RETRY_PAUSE=0")
    assert result.returncode != 0 and "pip install failed 4 times" in result.stderr
    assert [line for line in venv.splitlines() if " -e " in line] == [INSTALL] * 4
    assert not (tmp_path / "down" / ".venv" / ".installed").exists()
