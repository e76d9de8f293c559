"""One rank of a liveness job (driven by tests/parallel/test_liveness.py): a rank that
stops answering (frozen, or cut off by the network) must end the job, named; a rank that
is only slow must not.

    tfhvdrun -np N [--mpi] python liveness_worker.py --scenario S --result-dir DIR [--victim K]

Every rank writes its pid to DIR/pid.<rank> and its events as JSON lines to
DIR/rank<r>.events: ``step`` (every --report-every steps, with the wall time),
``collective_failed`` (type, message, wall time) and ``done``. Each step is an eager
allreduce (Sum) of float32 and int64 tensors whose exact result every rank checks.

freeze   the victim stops itself with SIGSTOP at step --at (``victim_acts`` first, with
         the wall time); the others go on until their collective fails
exit     the same, but the victim calls sys.exit(3); kill: SIGKILLs itself
run      every rank reduces until its collective fails or --max-seconds pass (the test
         cuts a host off from outside once DIR/steady exists: every rank reached --at)
slow     the victim sleeps --sleep seconds after step --at while the others wait in
         the next allreduce; every rank runs --steps steps and ends normally
"""

import argparse
import os
import signal
import sys
import time

from events import append_event

parser = argparse.ArgumentParser()
parser.add_argument("--scenario", required=True,
                    choices=("freeze", "run", "slow", "exit", "kill"))
parser.add_argument("--result-dir", required=True)
parser.add_argument("--victim", type=int, default=1)
parser.add_argument("--at", type=int, default=20)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--sleep", type=float, default=180.0)
parser.add_argument("--max-seconds", type=float, default=120.0)
parser.add_argument("--step-pause", type=float, default=0.02)
ARGS = parser.parse_args()

RANK = int(os.environ.get("HOROVOD_RANK") or os.environ.get("PMI_RANK") or 0)
DIR = ARGS.result_dir
with open(os.path.join(DIR, "pid.%d" % RANK), "w") as f:
    f.write(str(os.getpid()))


def emit(event, **fields):
    fields.update(event=event, rank=RANK, wall=time.time())
    print("LIVENESS " + append_event(DIR, RANK, fields), flush=True)


import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402

hvd.init()
SIZE = hvd.size()


def step(i):
    """One step: two allreduces whose sums every rank can predict exactly."""
    f = hvd.allreduce(tf.fill([1000], float(RANK + i)), op=hvd.Sum, name="f%d" % i)
    n = hvd.allreduce(tf.constant([RANK * 7 + i], tf.int64), op=hvd.Sum, name="n%d" % i)
    expected_f = float(sum(r + i for r in range(SIZE)))
    assert np.all(f.numpy() == expected_f), (i, f.numpy()[:3], expected_f)
    assert int(n.numpy()[0]) == sum(r * 7 + i for r in range(SIZE)), (i, n.numpy())


def main():
    start = time.time()
    i = 0
    while True:
        if ARGS.scenario == "freeze" and RANK == ARGS.victim and i == ARGS.at:
            emit("victim_acts", step=i)
            os.kill(os.getpid(), signal.SIGSTOP)
        if ARGS.scenario in ("exit", "kill") and RANK == ARGS.victim and i == ARGS.at:
            emit("victim_acts", step=i)
            if ARGS.scenario == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            sys.exit(3)
        if ARGS.scenario == "run" and i == ARGS.at:
            emit("steady", step=i)
            open(os.path.join(DIR, "steady.%d" % RANK), "w").close()
        try:
            step(i)
        except Exception as e:  # the error a user's script sees
            emit("collective_failed", type=type(e).__name__, message=str(e), step=i)
            raise
        if i % 10 == 0:
            emit("step", step=i)
        if ARGS.scenario == "slow" and RANK == ARGS.victim and i == ARGS.at:
            emit("sleeping", seconds=ARGS.sleep)
            time.sleep(ARGS.sleep)
            emit("woke")
        i += 1
        if ARGS.scenario == "slow" and i >= ARGS.steps:
            break
        if time.time() - start > ARGS.max_seconds:
            emit("too_long", step=i)
            sys.exit(7)
        time.sleep(ARGS.step_pause)
    emit("done", steps=i)
    hvd.shutdown()


main()
