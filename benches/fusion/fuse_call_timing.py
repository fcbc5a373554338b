"""Time one ``clirkit.fuse(paths, method="rrf", k=60, output=...)`` call (what ``clirkit fuse``
runs): wall and process CPU seconds (all threads). One call per process, so that two builds'
venvs can be alternated in the same minutes:

    VENV/bin/python benches/fusion/fuse_call_timing.py RUN1 RUN2 RUN3 OUT
"""

import sys
import time

from clirkit.fusion import fuse


def main() -> None:
    *paths, out = sys.argv[1:]
    wall, cpu = time.perf_counter(), time.process_time()
    fuse(paths, method="rrf", k=60, output=out)
    print(f"{time.perf_counter() - wall:.3f} s wall, {time.process_time() - cpu:.3f} s CPU")


if __name__ == "__main__":
    main()
