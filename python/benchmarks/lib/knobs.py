"""The environment that tunes a run (HOROVOD_*, malloc, TF, MPI), recorded with every run with
secrets redacted; and the malloc settings that keep large buffers in the heap.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import os


# Environment variables that change how a contender runs; recorded with every run.
KNOB_PREFIXES = ("HOROVOD_", "MALLOC_", "TF_", "OMP_", "KMP_", "MPIR_CVAR_", "MPICH_",
                 "FI_", "UCX_", "GLOO_", "TF_HVD_")


KNOB_EXCLUDE = ("TF_CONFIG",)  # recorded separately (it holds ports, not knobs)


# glibc keeps freed blocks below these sizes in the heap instead of returning them
# to the OS (munmap / trim) after every call, so large temporary buffers are reused.
MALLOC_REUSE_ENV = {"MALLOC_MMAP_THRESHOLD_": str(2 << 30),
                    "MALLOC_TRIM_THRESHOLD_": str(4 << 30)}


SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "KEY")


def knobs(env=None):
    """The environment variables that tune a run (Horovod knobs, malloc, TF, MPI).

    Values of secrets (e.g. the launcher's HOROVOD_GLOO_RENDEZVOUS_SECRET) are
    replaced by "<redacted>": result files get shared.
    """
    env = os.environ if env is None else env
    found = {}
    for k, v in sorted(env.items()):
        if k.startswith(KNOB_PREFIXES) and k not in KNOB_EXCLUDE:
            found[k] = "<redacted>" if any(w in k.upper() for w in SECRET_WORDS) else v
    return found
