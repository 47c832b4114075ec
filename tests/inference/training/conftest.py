"""Puts this folder (``training_helpers``) on ``sys.path`` (the ``archive`` fixture is
tests/inference/conftest.py's)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
