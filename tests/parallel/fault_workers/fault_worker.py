"""One rank of a fault-injection job (driven by tests/parallel/test_faults.py).

    tfhvdrun -np N [--mpi] python fault_worker.py --scenario S --result-dir DIR [--victim K]

Every rank records its pid in DIR/pid.<rank> (so the test can check that nothing
outlives the launcher) and reports what happened to it as JSON lines in
DIR/rank<r>.events (also printed as ``FAULT {...}``). The scenario decides what the
victim rank does wrong and what the others expect:

leave               the victim leaves the job the --how way (exit: sys.exit(3), raise,
                    kill: SIGKILL, shutdown: hvd.shutdown(), then exit 0 a moment later)
                    after a few steps; the others train on and record their error
shrink              the victim exits (status 0) after a warm-up; the others' next
                    collective fails naming it, then they shut down and init again as a
                    job of N-1 (new HOROVOD_RANK/SIZE in the same process) and reduce
kill / raise        the victim SIGKILLs itself / raises after a few training steps;
                    the others record the error their collectives get (they delay the
                    launcher's SIGTERM so that they can), and whether a later one fails too
stall               the victim sleeps before the allreduce 'stall_probe'; all complete
stall-shutdown      the victim sleeps past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; it
                    reports when its core stops (while asleep), then its late
                    collectives (eager and in a tf.function) must fail at once
peer-gone           the victim exits abruptly (status 0, so the launcher lets the
                    others finish) while the others wait in a collective run the
                    --first way (eagerly, in a tf.function, in a graph by
                    Session.run); then each way again: record every error's type
shutdown-pending    rank 0 has an allreduce no other rank submits; every rank calls
                    hvd.shutdown(); the pending op must fail (AbortedError), then a
                    collective after shutdown fails, init works again
exit-pending        like shutdown-pending, but nobody calls shutdown: the interpreter
                    exits with the op pending (must not hang or crash)
exit-plain          collectives, then exit without hvd.shutdown()
join                uneven data: rank r has 3 + 2r batches; ranks that run out call
                    hvd.join() while the others keep training; checks the weights
join-cached         a response-cached allreduce on the last rank after the others joined
never-init          the victim never calls hvd.init() (sleeps); the others' init fails
                    after the start timeout naming it
exit-before-init    the victim exits with status 0 before hvd.init()
init-only           hvd.init() and report its result (bad environment knobs)
"""

import argparse
import os
import signal
import sys
import threading
import time

from events import append_event

parser = argparse.ArgumentParser()
parser.add_argument("--scenario", required=True)
parser.add_argument("--result-dir", required=True)
parser.add_argument("--victim", type=int, default=1)
parser.add_argument("--steps-before", type=int, default=5)
parser.add_argument("--sleep", type=float, default=6.0)
parser.add_argument("--max-seconds", type=float, default=60.0)
parser.add_argument("--no-reinit", action="store_true")
parser.add_argument("--first", default="function", choices=("function", "graph", "eager"))
parser.add_argument("--how", default="exit", choices=("exit", "raise", "kill", "shutdown"))
ARGS = parser.parse_args()

RANK = int(os.environ.get("HOROVOD_RANK") or os.environ.get("PMI_RANK") or
           os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
DIR = ARGS.result_dir
T0 = time.monotonic()


def _write_atomically(name, text):
    path = os.path.join(DIR, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


_write_atomically("pid.%d" % RANK, str(os.getpid()))


def emit(event, **fields):
    fields.update(event=event, rank=RANK, pid=os.getpid(), t=round(time.monotonic() - T0, 3),
                  wall=round(time.time(), 3))
    print("FAULT " + append_event(DIR, RANK, fields), flush=True)


def error_fields(e):
    return {"type": type(e).__name__, "message": str(e)[:2000]}


_term = {"at": None}


def delay_sigterm():
    """Survivors keep going for a moment after the launcher's SIGTERM (it SIGKILLs
    them after its grace period anyway), so that they can report their errors."""
    def on_term(signum, frame):
        if _term["at"] is None:
            _term["at"] = time.monotonic()
            emit("sigterm")
    signal.signal(signal.SIGTERM, on_term)


if ARGS.scenario == "never-init" and RANK == ARGS.victim:
    emit("sleeping_before_init")
    time.sleep(3600)
if ARGS.scenario == "exit-before-init" and RANK == ARGS.victim:
    emit("exiting_before_init")
    sys.exit(0)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402

init_start = time.monotonic()
try:
    hvd.init()
except Exception as e:  # noqa: BLE001
    emit("init_failed", seconds=round(time.monotonic() - init_start, 2), **error_fields(e))
    sys.exit(1)
N = hvd.size()
emit("initialized", size=N)


# -- a small model trained with DistributedGradientTape -----------------------------------

def make_model(seed=1):
    rng = np.random.RandomState(seed)
    return [tf.Variable(rng.randn(*shape).astype(np.float32) * 0.3, name="w%d" % i)
            for i, shape in enumerate([(4, 8), (8,), (8, 1), (1,)])]


def forward(variables, x):
    w0, b0, w1, b1 = variables
    return tf.matmul(tf.tanh(tf.matmul(x, w0) + b0), w1) + b1


def batch(rank, step, size=8):
    rng = np.random.RandomState(1000 * rank + step)
    x = rng.randn(size, 4).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)
    return x, y


def make_train_step(variables, lr=0.05):
    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(variables, x) - y))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, variables)
        for v, g in zip(variables, grads):
            v.assign_sub(lr * g)
        return loss
    return train_step


def train_until_failure(victim_action):
    """Trains; the victim calls victim_action() at step --steps-before. Returns when a
    collective fails (after recording it) or after --max-seconds."""
    delay_sigterm()
    variables = make_model()
    step_fn = make_train_step(variables)
    step = 0
    last_ok = time.monotonic()
    while time.monotonic() - T0 < ARGS.max_seconds:
        if RANK == ARGS.victim and step == ARGS.steps_before:
            emit("victim_acts", step=step)
            victim_action()
        x, y = batch(RANK, step)
        try:
            step_fn(tf.constant(x), tf.constant(y))
        except Exception as e:  # noqa: BLE001
            emit("collective_failed", step=step,
                 seconds_since_last_ok=round(time.monotonic() - last_ok, 2),
                 **error_fields(e))
            later_start = time.monotonic()
            try:
                hvd.allreduce(tf.ones([3]), name="after_failure")
                emit("later_collective_ok")
            except Exception as e2:  # noqa: BLE001
                emit("later_collective_failed",
                     seconds=round(time.monotonic() - later_start, 2), **error_fields(e2))
            return
        last_ok = time.monotonic()
        step += 1
        if step == ARGS.steps_before + 1:
            emit("steps_done", step=step)
    emit("no_error", steps=step)


def scenario_kill():
    train_until_failure(lambda: os.kill(os.getpid(), signal.SIGKILL))
    sys.exit(1)


def scenario_raise():
    def fail():
        raise RuntimeError("deliberate failure on rank %d" % RANK)
    train_until_failure(fail)
    sys.exit(1)


def scenario_leave():
    def leave():
        if ARGS.how == "exit":
            sys.exit(3)
        if ARGS.how == "raise":
            raise RuntimeError("deliberate failure on rank %d" % RANK)
        if ARGS.how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        hvd.shutdown()
        time.sleep(1.0)
        sys.exit(0)
    train_until_failure(leave)
    sys.exit(1)


def scenario_shrink():
    hvd.allreduce(tf.ones([2]), name="warmup")
    if RANK == ARGS.victim:
        emit("victim_acts")
        sys.exit(0)
    start = time.monotonic()
    while time.monotonic() - start < 30:
        try:
            hvd.allreduce(tf.ones([2]), name="until_failure")
        except Exception as e:  # noqa: BLE001
            emit("collective_failed", **error_fields(e))
            break
        time.sleep(0.05)
    hvd.shutdown()
    new_rank = RANK if RANK < ARGS.victim else RANK - 1
    for name, value in (("HOROVOD_RANK", new_rank), ("HOROVOD_SIZE", N - 1),
                        ("HOROVOD_LOCAL_RANK", new_rank), ("HOROVOD_LOCAL_SIZE", N - 1)):
        os.environ[name] = str(value)
    hvd.init()
    out = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum, name="after_shrink")
    emit("reinit", new_rank=hvd.rank(), size=hvd.size(), value=float(out.numpy()[0]))
    hvd.shutdown()


# -- stalls ---------------------------------------------------------------------------------

def stall_probe():
    start = time.monotonic()
    try:
        out = hvd.allreduce(tf.constant([float(RANK + 1)]), op=hvd.Sum, name="stall_probe")
        emit("probe_done", value=float(out.numpy()[0]),
             seconds=round(time.monotonic() - start, 2))
        return True
    except Exception as e:  # noqa: BLE001
        emit("probe_failed", seconds=round(time.monotonic() - start, 2), **error_fields(e))
        return False


def scenario_stall():
    hvd.allreduce(tf.ones([2]), name="warmup")
    if RANK == ARGS.victim:
        emit("victim_sleeps", seconds=ARGS.sleep)
        time.sleep(ARGS.sleep)
    ok = stall_probe()
    out = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, name="after_stall")
    emit("after_stall", value=float(out.numpy()[0]))
    hvd.shutdown()
    sys.exit(0 if ok else 1)


def scenario_stall_shutdown():
    hvd.allreduce(tf.ones([2]), name="warmup")
    if RANK == ARGS.victim:
        late = traced_late_collective()
        emit("victim_sleeps", seconds=ARGS.sleep)
        wake = time.monotonic() + ARGS.sleep
        while time.monotonic() < wake:
            if not hvd.is_initialized():
                emit("core_stopped")  # the stall shutdown reached this rank too
                break
            time.sleep(0.05)
        time.sleep(max(0.0, wake - time.monotonic()))
        ok = stall_probe()
        start = time.monotonic()
        try:
            late(tf.ones([2]))
            emit("late_done")
        except Exception as e:  # noqa: BLE001
            emit("late_failed", seconds=round(time.monotonic() - start, 2), **error_fields(e))
        sys.exit(0 if ok else 1)
    delay_sigterm()
    ok = stall_probe()
    # Stay until the victim has woken up and reported, so that the launcher does not
    # stop it first.
    deadline = time.monotonic() + ARGS.sleep + 4
    while time.monotonic() < deadline:
        time.sleep(0.1)
    sys.exit(0 if ok else 1)


def traced_late_collective():
    """A tf.function collective traced now (tracing checks in Python that Horovod
    runs), so that a later call meets the stopped core in the kernel."""
    @tf.function
    def step(x):
        return hvd.allreduce(x, name="late_in_function")
    return step.get_concrete_function(tf.TensorSpec([2], tf.float32))


# -- error types when a peer is gone -----------------------------------------------------------

def scenario_peer_gone():
    @tf.function
    def in_function(x):
        return hvd.allreduce(x, name="in_function")
    concrete = in_function.get_concrete_function(tf.TensorSpec([2], tf.float32))
    graph = tf.Graph()
    with graph.as_default():
        in_graph = hvd.allreduce(tf.ones([2]), name="in_graph")
    sess = tf.compat.v1.Session(graph=graph)
    hvd.allreduce(tf.ones([2]), name="warmup")
    if RANK == ARGS.victim:
        time.sleep(1.0)
        emit("victim_acts")
        os._exit(0)  # no shutdown: the others' collectives find it gone
    calls = {"function": lambda: concrete(tf.ones([2])),
             "graph": lambda: sess.run(in_graph),
             "eager": lambda: hvd.allreduce(tf.ones([2]), name="eager")}
    order = [ARGS.first] + sorted(k for k in calls if k != ARGS.first)
    for i, kind in enumerate(order):
        start = time.monotonic()
        try:
            calls[kind]()
            emit("ok_" + kind)
        except Exception as e:  # noqa: BLE001
            emit("failed_" + kind, pending=(i == 0),
                 seconds=round(time.monotonic() - start, 2), **error_fields(e))


# -- shutdown and exit with pending collectives ----------------------------------------------

def start_pending_op():
    """Rank 0 submits an allreduce that no other rank ever submits."""
    state = {}

    def run():
        start = time.monotonic()
        try:
            hvd.allreduce(tf.ones([4]), name="never_matched")
            state["result"] = "completed"
        except Exception as e:  # noqa: BLE001
            state["result"] = "failed"
            emit("pending_failed", seconds=round(time.monotonic() - start, 2),
                 **error_fields(e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(1.0)  # it is queued in the core by now
    return thread, state


def scenario_shutdown_pending():
    hvd.allreduce(tf.ones([2]), name="warmup")
    thread = state = None
    if RANK == 0:
        thread, state = start_pending_op()
    hvd.barrier()
    start = time.monotonic()
    hvd.shutdown()
    emit("shutdown_returned", seconds=round(time.monotonic() - start, 2))
    if thread is not None:
        thread.join(30)
        emit("pending_thread", alive=thread.is_alive(), result=state.get("result"))
    try:
        hvd.allreduce(tf.ones([2]), name="after_shutdown")
        emit("after_shutdown_ok")
    except Exception as e:  # noqa: BLE001
        emit("after_shutdown_failed", **error_fields(e))
    if ARGS.no_reinit:
        return
    try:
        hvd.init()
        out = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, name="after_reinit")
        emit("reinit", size=hvd.size(), value=float(out.numpy()[0]))
        hvd.shutdown()
    except Exception as e:  # noqa: BLE001
        emit("reinit_failed", **error_fields(e))


def scenario_exit_pending():
    hvd.allreduce(tf.ones([2]), name="warmup")
    if RANK == 0:
        start_pending_op()
    hvd.barrier()
    emit("exiting")
    # no hvd.shutdown(): the interpreter exits with rank 0's op still pending


def scenario_exit_plain():
    for i in range(3):
        hvd.allreduce(tf.ones([2]), name="plain_%d" % i)
    emit("exiting")


# -- uneven data with join ---------------------------------------------------------------------

def scenario_join():
    lr = 0.05
    variables = make_model()
    step_fn = make_train_step(variables, lr)
    batches = 3 + 2 * RANK
    for step in range(batches):
        x, y = batch(RANK, step)
        step_fn(tf.constant(x), tf.constant(y))
        emit("step", step=step)
    last = int(hvd.join().numpy())
    emit("join_returned", last_joined=last)
    # Ranks that joined early stopped updating their weights: take the last one's.
    hvd.broadcast_variables(variables, root_rank=last)
    mine = [v.numpy() for v in variables]
    # The same training computed here for all ranks: each step averages (over all N
    # ranks) the gradients of the ranks that still have data; ranks that joined
    # contribute zeros.
    ref = make_model()
    for step in range(3 + 2 * (N - 1)):
        total = [np.zeros(v.shape, np.float32) for v in ref]
        for r in range(N):
            if step < 3 + 2 * r:
                x, y = batch(r, step)
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(forward(ref, tf.constant(x)) - y))
                for t, g in zip(total, tape.gradient(loss, ref)):
                    t += g.numpy()
        for v, t in zip(ref, total):
            v.assign_sub(lr * t / N)
    err = max(float(np.max(np.abs(a - b.numpy()))) for a, b in zip(mine, ref))
    gathered = hvd.allgather(tf.concat([tf.reshape(v, [-1]) for v in variables], 0)[None])
    spread = float(np.max(np.ptp(gathered.numpy(), axis=0)))
    emit("joined", batches=batches, last_joined=last, max_error=err, spread=spread)
    hvd.shutdown()


def scenario_join_cached():
    """Minimal case: a cached allreduce of a rank whose peer has joined."""
    hvd.allreduce(tf.ones([2]), name="g")  # every rank: the response is now cached
    if RANK == N - 1:
        start = time.monotonic()
        hvd.allreduce(tf.ones([2]), name="g")  # the others have joined meanwhile
        emit("cached_after_join", seconds=round(time.monotonic() - start, 2))
    hvd.join()
    hvd.shutdown()


def scenario_init_only():
    emit("init_ok")
    hvd.shutdown()


SCENARIOS = {
    "kill": scenario_kill,
    "leave": scenario_leave,
    "shrink": scenario_shrink,
    "raise": scenario_raise,
    "stall": scenario_stall,
    "stall-shutdown": scenario_stall_shutdown,
    "peer-gone": scenario_peer_gone,
    "shutdown-pending": scenario_shutdown_pending,
    "exit-pending": scenario_exit_pending,
    "exit-plain": scenario_exit_plain,
    "join": scenario_join,
    "join-cached": scenario_join_cached,
    "never-init": scenario_init_only,
    "exit-before-init": scenario_init_only,
    "init-only": scenario_init_only,
}

SCENARIOS[ARGS.scenario]()
