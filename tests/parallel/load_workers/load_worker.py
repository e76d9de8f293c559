"""Load on one job (driven by tests/parallel/test_load.py).

    tfhvdrun -np N [--mpi] python load_worker.py --result-dir DIR [--tensors 5000] [--threads 50]

Two sections, each reporting JSON events to DIR/rank<r>.events:

* many tensors: one tf.function step with --tensors distinct allreduces (float32 and
  int32, shapes of 1 to 7 elements, alternating Sum / Max) run twice (the second run
  goes through the response cache where it can: its capacity is smaller than the
  number of tensors); every one of the outputs is checked exactly;
* many threads: --threads Python threads start together (threading.Barrier) and each
  submits --per-thread eager collectives (allreduce, allgather or broadcast by thread
  number) with names of its own; every result is checked.
"""

import argparse
import json
import os
import threading
import time

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--result-dir", required=True)
parser.add_argument("--tensors", type=int, default=5000)
parser.add_argument("--threads", type=int, default=50)
parser.add_argument("--per-thread", type=int, default=10)
ARGS = parser.parse_args()

hvd.init()
R, N = hvd.rank(), hvd.size()
with open(os.path.join(ARGS.result_dir, "pid.%d" % R), "w") as f:
    f.write(str(os.getpid()))


def emit(event, **fields):
    fields.update(event=event, rank=R)
    line = json.dumps(fields, sort_keys=True)
    with open(os.path.join(ARGS.result_dir, "rank%d.events" % R), "a") as f:
        f.write(line + "\n")
    print("LOAD " + line, flush=True)


# -- many distinct tensors in one step -----------------------------------------------------

def tensor_spec(i):
    dtype = tf.float32 if i % 2 == 0 else tf.int32
    op = hvd.Sum if i % 4 < 2 else hvd.Max
    return dtype, op, 1 + i % 7


def contribution(i, rank, k):
    return (np.arange(k) + (i % 100) + 1) * (rank + 1)


def many_tensors():
    count = ARGS.tensors
    inputs = []
    for i in range(count):
        dtype, _, k = tensor_spec(i)
        inputs.append(tf.constant(contribution(i, R, k), dtype=dtype))

    @tf.function
    def step(tensors):
        outs = []
        for i, t in enumerate(tensors):
            _, op, _ = tensor_spec(i)
            outs.append(hvd.allreduce(t, op=op, name="many_%d" % i))
        return outs

    start = time.monotonic()
    step.get_concrete_function(inputs)  # trace (5,000 ops) outside the timed runs
    emit("traced", seconds=round(time.monotonic() - start, 2))
    sum_factor = N * (N + 1) // 2
    for attempt in range(2):
        start = time.monotonic()
        outs = step(inputs)
        seconds = time.monotonic() - start
        wrong = []
        for i, out in enumerate(outs):
            dtype, op, k = tensor_spec(i)
            base = np.arange(k) + (i % 100) + 1
            expected = base * (sum_factor if op == hvd.Sum else N)
            got = out.numpy()
            if got.shape != (k,) or not np.array_equal(got, expected.astype(got.dtype)):
                wrong.append(i)
        emit("many_tensors", attempt=attempt, count=len(outs), wrong=wrong[:20],
             wrong_count=len(wrong), seconds=round(seconds, 2))


# -- many threads submitting at once ----------------------------------------------------------

def many_threads():
    threads_n, per = ARGS.threads, ARGS.per_thread
    barrier = threading.Barrier(threads_n)
    errors = []
    done = [0] * threads_n

    def work(j):
        try:
            barrier.wait(60)
            for i in range(per):
                name = "thread%d_op%d" % (j, i)
                kind = j % 3
                if kind == 0:
                    out = hvd.allreduce(tf.constant([float(R + j + i)] * 3), op=hvd.Sum,
                                        name=name).numpy()
                    expected = [float(N * (j + i) + N * (N - 1) // 2)] * 3
                elif kind == 1:
                    out = hvd.allgather(tf.fill([R + 1, 2], j * 1000 + i + R),
                                        name=name).numpy().tolist()
                    expected = []
                    for r in range(N):
                        expected += [[j * 1000 + i + r] * 2] * (r + 1)
                else:
                    root = (j + i) % N
                    out = hvd.broadcast(tf.constant([R * 10 + j, i]), root_rank=root,
                                        name=name).numpy().tolist()
                    expected = [root * 10 + j, i]
                if np.asarray(out).tolist() != np.asarray(expected).tolist():
                    errors.append("%s: got %r, expected %r" % (name, out, expected))
                done[j] += 1
        except Exception as e:  # noqa: BLE001
            errors.append("thread %d: %s: %s" % (j, type(e).__name__, str(e)[:300]))

    start = time.monotonic()
    workers = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(threads_n)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(240)
    emit("many_threads", threads=threads_n, completed=sum(done),
         expected=threads_n * per, errors=errors[:20], error_count=len(errors),
         stuck=sum(t.is_alive() for t in workers), seconds=round(time.monotonic() - start, 2))


many_tensors()
many_threads()
hvd.shutdown()
emit("done")
