"""clirkit, its CLI and clirkit.distributed import without Ray; asking for a cluster then says how
to get it (Ray is an optional extra, and needs Python >= 3.10)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["ray"] = None  # as if Ray were not installed
import clirkit, clirkit.cli, clirkit.distributed
from clirkit.distributed.cluster import require_ray
try:
    require_ray()
except ImportError as e:
    print(e)
"""


def test_clirkit_imports_without_ray():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    assert "pip install 'clirkit[ray]'" in out
