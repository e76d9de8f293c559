"""Training that saves every step and is SIGKILLed on a schedule (driven by
tests/parallel/test_checkpoint_chaos.py):

    tfhvdrun -np 2 --max-restarts K python chaos_train.py --mode fit|loop --dir DIR
             --steps S [--schedule kills.json] [--check-restore]

fit    model.fit, an MLP with Dropout (its seed state is part of the state), a sharded
       DistributedOptimizer(Adam), hvd.callbacks.BackupAndRestore(save_freq=1), 4 steps
       an epoch (a kill mid-epoch resumes mid-epoch);
loop   a tf.function loop with DistributedGradientTape over a DistributedEmbedding (each
       rank holds its rows: every rank writes its part of a save) and a dense head,
       DistributedOptimizer(Adam), hvd.Checkpointer saved every step.

kills.json lists {"restart": i, "ranks": [...], "step": s, "phase": p}: in run i (the
launcher's TF_HVD_RESTART_COUNT) the listed ranks SIGKILL themselves at global step s,
at phase "train" (after the step, before its save), "write" (after the first file of
their part is written), "publish" (rank 0: after the manifest is written, before the
step is renamed into place) or "saved" (after the save returned).

Every rank appends JSON events to DIR/rank<r>.events: "saving" with the step and a
fingerprint of the whole state before each save, "restored" with the step and the
fingerprint of what it loaded, "done"; at the end DIR/final.rank<r>.npz holds the whole
state (weights, the optimizer's whole state, whole tables). --check-restore (another
number of ranks) only restores, records, trains 2 steps and saves.
"""

import argparse
import hashlib
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["fit", "loop"], required=True)
parser.add_argument("--dir", required=True)
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--schedule", default=None)
parser.add_argument("--check-restore", action="store_true")
ARGS = parser.parse_args()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402
import tf_hvd.keras as hk  # noqa: E402
from tf_hvd.checkpoint import Step, commit  # noqa: E402
from tf_hvd.sharded_rows import is_sharded_rows  # noqa: E402
from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig  # noqa: E402
from events import append_event  # noqa: E402

hk.init()
RANK, SIZE = hk.rank(), hk.size()
RESTART = int(os.environ.get("TF_HVD_RESTART_COUNT", "0"))
keras.utils.set_random_seed(11)
tf.config.experimental.enable_op_determinism()
CKPT = os.path.join(ARGS.dir, "ckpt")
BATCH, STEPS_PER_EPOCH, VOCAB = 4, 4, 40


def emit(event, **fields):
    fields.update(event=event, rank=RANK, restart=RESTART, size=SIZE)
    append_event(ARGS.dir, RANK, fields)


# -- the kill schedule ---------------------------------------------------------------------
KILL = {}
if ARGS.schedule:
    with open(ARGS.schedule) as f:
        for k in json.load(f):
            if k["restart"] == RESTART and RANK in k["ranks"]:
                KILL = k
STEP = {"now": None}  # the global step being saved


def maybe_die(phase):
    if KILL and KILL["phase"] == phase and KILL["step"] == STEP["now"]:
        emit("killed", step=STEP["now"], phase=phase)
        os.kill(os.getpid(), signal.SIGKILL)


_write_json = commit.write_json_atomically


def _then_maybe_die(write):
    # every way a rank's file enters its part (added by path, or written with its
    # CRC-32 taken on the way): the kill comes after the first one
    def wrapped(self, *args, **kwargs):
        out = write(self, *args, **kwargs)
        maybe_die("write")
        return out
    return wrapped


def _write_json_then_maybe_die(path, value):
    _write_json(path, value)
    if path.endswith("manifest.json"):
        maybe_die("publish")


for _method in ("add", "write_arrays", "write_array"):
    setattr(commit.StepWriter, _method, _then_maybe_die(getattr(commit.StepWriter, _method)))
commit.write_json_atomically = _write_json_then_maybe_die


# -- the state, whole ----------------------------------------------------------------------
def whole_state(model, opt):
    """{name: array} of everything saved, whole (a collective: gathers)."""
    out = {}
    for i, v in enumerate(model.variables):
        if is_sharded_rows(v):
            continue
        out["model/%d" % i] = np.asarray(v)
    if getattr(type(opt), "_hvd_sharded", False):
        values = opt.gather_state(root_rank=None)
    else:
        values = [np.asarray(v) for v in opt.variables]
    for i, value in enumerate(values):
        out["opt/%d" % i] = np.asarray(value)
    for layer in model.layers:
        if isinstance(layer, DistributedEmbedding):
            for key, value in sorted(layer.gather_whole(None).items()):
                out["%s/%s" % (layer.name, key)] = np.asarray(value)
    return out


def fingerprint(state):
    h = hashlib.sha1()
    for key in sorted(state):
        h.update(key.encode())
        h.update(np.ascontiguousarray(state[key]).tobytes())
    return h.hexdigest()


def data(step):
    """Rank RANK's batch of global step ``step`` (the same in every run)."""
    rng = np.random.RandomState(1000 * step + RANK)
    x = rng.randn(BATCH, 6).astype(np.float32)
    ids = rng.randint(0, VOCAB, size=(BATCH,)).astype(np.int32)
    y = (x.sum(axis=1, keepdims=True) * 0.3 + (ids[:, None] % 5) * 0.1).astype(np.float32)
    return x, ids, y


# -- fit -------------------------------------------------------------------------------------
def run_fit():
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dropout(0.25), keras.layers.Dense(1)])
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.02), sharded=True)
    model.compile(optimizer=opt, loss="mse")
    # every epoch is the same 4 batches in order (Keras starts each epoch's arrays anew)
    batches = [data(b) for b in range(STEPS_PER_EPOCH)]
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[2] for b in batches])
    backup = hk.callbacks.BackupAndRestore(CKPT, save_freq=1, delete_checkpoint=False)

    class Before(keras.callbacks.Callback):  # listed before BackupAndRestore
        def on_train_batch_end(self, batch, logs=None):
            if backup._skipped_last:
                return
            STEP["now"] = backup._step + 1  # the step BackupAndRestore saves next
            maybe_die("train")
            emit("saving", step=STEP["now"], fp=fingerprint(whole_state(model, opt)))

    class After(keras.callbacks.Callback):  # listed after it
        def on_train_begin(self, logs=None):
            emit("restored", step=backup._step, epoch=backup._epoch,
                 skip=backup._to_skip, fp=fingerprint(whole_state(model, opt)))

        def on_train_batch_end(self, batch, logs=None):
            maybe_die("saved")

    epochs = ARGS.steps // STEPS_PER_EPOCH
    if ARGS.check_restore:  # one more epoch at this number of ranks
        epochs = int(Step.newest(CKPT).meta["counters"]["epoch"]) + 1
    model.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0,
              callbacks=[Before(), backup, After()])
    return model, opt


# -- loop ------------------------------------------------------------------------------------
def run_loop():
    table = TableConfig("items", VOCAB, 3, initializer="zeros", sharding="mod")
    emb = DistributedEmbedding({"item": FeatureConfig("item", table, (None,), (None, 3))},
                               name="emb")
    x_in = keras.Input((6,), name="x")
    id_in = keras.Input((), dtype="int32", name="item")
    h = keras.layers.Concatenate()([x_in, emb({"item": id_in})["item"]])
    model = keras.Model([x_in, id_in], keras.layers.Dense(1, name="head")(h))
    rows = np.random.RandomState(5).randn(VOCAB, 3).astype(np.float32) * 0.1
    emb.set_table("items", rows)
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.02))
    variables = model.trainable_variables

    @tf.function
    def train_step(x, ids, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model([x, ids], training=True) - y))
        tape = hvd.DistributedGradientTape(tape)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    ckpt = hvd.Checkpointer(CKPT, model, opt, keep=2)
    start = ckpt.restore().get("step", 0)
    emit("restored", step=start, fp=fingerprint(whole_state(model, opt)))
    end = start + 2 if ARGS.check_restore else ARGS.steps
    for step in range(start, end):
        train_step(*data(step))
        STEP["now"] = step + 1
        maybe_die("train")
        emit("saving", step=step + 1, fp=fingerprint(whole_state(model, opt)))
        ckpt.save(step + 1)
        maybe_die("saved")
    return model, opt


model, opt = run_fit() if ARGS.mode == "fit" else run_loop()
state = whole_state(model, opt)
np.savez(os.path.join(ARGS.dir, "final.rank%d.npz" % RANK), **state)
emit("done", fp=fingerprint(state))
