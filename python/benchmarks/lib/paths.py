"""Where the benchmarks and their results live.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import os

LIB_DIR = os.path.dirname(os.path.abspath(__file__))
BENCH_DIR = os.path.dirname(LIB_DIR)  # python/benchmarks: the drivers
REPO_ROOT = os.path.dirname(os.path.dirname(BENCH_DIR))
DEFAULT_RESULTS_DIR = os.path.join(BENCH_DIR, "results")


def ensure_dir(path):
    os.makedirs(path, exist_ok=True)
    return path
