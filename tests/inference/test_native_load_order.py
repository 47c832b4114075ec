"""torch and chdb in one process: importing ``inference`` loads chdb's runtime first, so a
failing chdb query raises instead of hanging (torch's runtime loaded first breaks it)."""

import subprocess
import sys

SCRIPT = """
import tempfile
import inference  # must load chdb before torch
import torch
import chdb
torch.ones(2) @ torch.ones(2)
conn = chdb.connect(tempfile.mkdtemp())
try:
    conn.query("SELECT nope", "CSV")
except Exception as e:
    print("raised", type(e).__name__)
"""


def test_a_failing_chdb_query_raises_after_inference_and_torch_are_loaded():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "raised" in out.stdout
