"""Training functions for the Ray cluster tests (sent to the actors by reference) and
their single-process references (run in the driver).

Keras fit: the global data is cut into passes of ``size * batch`` rows; in every pass
rank r takes the r-th block of ``batch`` rows. With averaged gradients, ``size`` ranks
fitting ``batch`` rows each make exactly the updates of one process fitting batches of
``size * batch`` rows.

Elastic: step s trains on the global batch ``s`` of GLOBAL_BATCH rows, split evenly
between the workers of the moment (12 divides by 4, 3 and 2), so the final weights equal
one process's whatever the job's size was at each step, provided the rollback to the
last commit is exact.
"""

import json
import os
import signal
import time

import numpy as np

DIM = 6
GLOBAL_BATCH = 12


def make_data(rows, seed=1234):
    rs = np.random.RandomState(seed)
    x = rs.randn(rows, DIM).astype(np.float32)
    y = (x @ rs.randn(DIM, 1) * 0.5 + 0.1 * rs.randn(rows, 1)).astype(np.float32)
    return x, y


def make_model():
    import keras
    return keras.Sequential([
        keras.Input((DIM,)),
        keras.layers.Dense(8, activation="tanh",
                           kernel_initializer=keras.initializers.GlorotUniform(seed=1)),
        keras.layers.Dense(1, kernel_initializer=keras.initializers.GlorotUniform(seed=2)),
    ])


def shard(x, passes, size, batch, rank):
    rows = [np.arange(p * size * batch + rank * batch, p * size * batch + (rank + 1) * batch)
            for p in range(passes)]
    return x[np.concatenate(rows)]


def keras_fit_rank(passes, batch, epochs, lr):
    """One rank of the data-parallel fit; returns its rank facts and final weights."""
    import keras

    import tf_hvd.keras as hvd
    hvd.init()
    size, rank = hvd.size(), hvd.rank()
    x, y = make_data(passes * size * batch)
    model = make_model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr)), loss="mse")
    t0 = time.time()
    history = model.fit(shard(x, passes, size, batch, rank), shard(y, passes, size, batch, rank),
                        batch_size=batch, epochs=epochs, shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    return {"rank": rank, "size": size, "local_rank": hvd.local_rank(),
            "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
            "cross_size": hvd.cross_size(), "host": os.uname().nodename,
            "fit_s": time.time() - t0, "loss": [float(v) for v in history.history["loss"]],
            "weights": [w.tolist() for w in model.get_weights()]}


def keras_fit_reference(size, passes, batch, epochs, lr):
    import keras
    x, y = make_data(passes * size * batch)
    model = make_model()
    model.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    model.fit(x, y, batch_size=size * batch, epochs=epochs, shuffle=False, verbose=0)
    return [w.tolist() for w in model.get_weights()]


def _step(model, optimizer, x, y, tape_wrapper=None):
    import tensorflow as tf
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    if tape_wrapper is not None:
        tape = tape_wrapper(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def elastic_train(steps, victim, kill_at, lr, pause_s, regrow_at=None, marker=None,
                  regrow_timeout_s=240):
    """An elastic custom loop; worker ``victim`` SIGKILLs itself at step ``kill_at``
    while the job still has its first size. With ``regrow_at``: from that step on the
    workers wait (committing, which lets newcomers in) until the job has its first size
    again; rank 0 creates ``marker`` when it starts waiting."""
    import keras

    import tf_hvd as hvd
    import tf_hvd.elastic
    hvd.init()
    my_id = int(os.environ["TF_HVD_ELASTIC_ID"])
    first_size = hvd.size()
    model = make_model()
    optimizer = keras.optimizers.SGD(lr)
    state = tf_hvd.elastic.TensorFlowKerasState(model, optimizer, step=0, samples=0)
    sizes = []

    @tf_hvd.elastic.run
    def loop(state):
        deadline = time.monotonic() + regrow_timeout_s
        while state.step < steps:
            if regrow_at is not None and state.step == regrow_at and hvd.size() < first_size:
                if marker and hvd.rank() == 0 and not os.path.exists(marker):
                    open(marker, "w").close()
                if time.monotonic() > deadline:
                    raise RuntimeError("the job did not grow back to %d workers" % first_size)
                time.sleep(0.2)
                state.commit()
                continue
            if my_id == victim and state.step == kill_at and hvd.size() == first_size:
                os.kill(os.getpid(), signal.SIGKILL)
            x, y = make_data(GLOBAL_BATCH, seed=state.step)
            n = GLOBAL_BATCH // hvd.size()
            part = slice(hvd.rank() * n, (hvd.rank() + 1) * n)
            _step(model, optimizer, x[part], y[part], hvd.DistributedGradientTape)
            state.samples += int(hvd.allreduce(np.int64(n), op=hvd.Sum, name="samples"))
            state.step += 1
            sizes.append(hvd.size())
            state.commit()
            time.sleep(pause_s)

    loop(state)
    return {"id": my_id, "rank": hvd.rank(), "size": hvd.size(), "first_size": first_size,
            "step": state.step, "samples": state.samples, "sizes": sorted(set(sizes)),
            "host": os.uname().nodename, "weights": [w.tolist() for w in model.get_weights()]}


def elastic_epochs(logfile, pid_dir, epochs=3, batches=3, epoch_wait=2.0, slow_from=None,
                   slow_start=0.0, grow_at=None, grow_to=4, grow_timeout_s=240):
    """Horovod's elastic_tensorflow2_main.py loop (as fault_workers/
    horovod_elastic_epochs.py runs it under tfhvdrun), as a Ray worker function: a commit
    after each batch and at the end of each epoch, rank 0 appending one JSON record per
    finished epoch to ``logfile`` (with the time it wrote it). Each worker writes its pid
    to ``pid_dir/pid.<id>`` first (the test kills workers by it); a worker whose id is
    ``slow_from`` or more sleeps ``slow_start`` s before importing TensorFlow (a newcomer
    on a real cluster takes long to start). With ``grow_at``: epoch ``grow_at`` starts
    once the job has ``grow_to`` workers (until then the workers commit every 0.5 s
    without training, which lets newcomers in; ``commits`` counts only the loop's own
    commits, as Horovod's records do). ``epoch_wait`` is spent in the batches (Horovod's
    script sleeps after the record): the record and the epoch's commit follow the last
    batch's commit at once, so that a rank 0 killed at any moment of an epoch leaves the
    epoch to be recorded by the next rank 0 (a commit saves before its check fails)."""
    my_id = int(os.environ["TF_HVD_ELASTIC_ID"])
    with open(os.path.join(pid_dir, "pid.%d" % my_id), "w") as f:
        f.write("%d\n" % os.getpid())
    if slow_from is not None and my_id >= slow_from:
        time.sleep(slow_start)
    import keras
    import tensorflow as tf

    import tf_hvd as hvd
    import tf_hvd.elastic
    hvd.init()
    start_rank = int(os.environ["HOROVOD_RANK"])  # read after init, as Horovod's does
    features = tf.random.stateless_uniform([32, 2], seed=[1, 2])
    labels = tf.one_hot(tf.random.stateless_uniform([32], seed=[3, 4], maxval=2,
                                                    dtype=tf.int64), 2)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="softmax")])
    optimizer = keras.optimizers.SGD(0.001)

    def train_step(distributed=True):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.categorical_crossentropy(
                labels, model(features, training=True)))
        if distributed:
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    train_step(distributed=False)  # builds the model and the optimizer's variables
    state = tf_hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0,
                                                commits=0, rendezvous=0)

    @tf_hvd.elastic.run
    def train(state):
        state.rendezvous += 1
        deadline = time.monotonic() + grow_timeout_s
        while state.epoch < epochs:
            if state.epoch == grow_at and state.batch == 0 and hvd.size() < grow_to:
                if time.monotonic() > deadline:
                    raise RuntimeError("the job did not grow to %d workers" % grow_to)
                time.sleep(0.5)
                state.commit()
                continue
            while state.batch < batches:
                train_step()
                time.sleep(epoch_wait / batches)
                state.batch += 1
                state.commits += 1
                state.commit()
            if hvd.rank() == 0:
                with open(logfile, "a") as f:
                    f.write(json.dumps({
                        "epoch": state.epoch, "batch": state.batch, "commits": state.commits,
                        "hostname": os.uname().nodename, "start_rank": start_rank,
                        "rank": hvd.rank(), "size": hvd.size(),
                        "rendezvous": state.rendezvous, "time": time.time()}) + "\n")
            state.epoch += 1
            state.batch = 0
            state.commits += 1
            state.commit()

    train(state)
    return {"id": my_id, "rank": hvd.rank(), "size": hvd.size(), "commits": state.commits}


def elastic_reference(steps, lr):
    import keras
    model = make_model()
    optimizer = keras.optimizers.SGD(lr)
    for step in range(steps):
        x, y = make_data(GLOBAL_BATCH, seed=step)
        _step(model, optimizer, x, y)
    return [w.tolist() for w in model.get_weights()]


def tensorflow_trainer_loop(config):
    """Ray Train's own TensorflowTrainer runs this on every worker, unchanged from a tf_hvd
    script: hvd.init() reads the TF_CONFIG Ray set. Each worker writes what it saw to
    ``<out_dir>/rank-<r>.json``. With ``victim`` set, that rank SIGKILLs itself after
    hvd.init() in the first attempt (the one that creates ``marker``)."""
    import ray.train

    import tf_hvd.keras as hvd
    hvd.init()
    victim, marker = config.get("victim"), config.get("marker")
    if victim is not None and hvd.rank() == victim:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.kill(os.getpid(), signal.SIGKILL)
        except FileExistsError:
            pass  # the attempt after the failure trains
    result = keras_fit_rank(config["passes"], config["batch"], config["epochs"], config["lr"])
    context = ray.train.get_context()
    result.update(world_rank=context.get_world_rank(), tf_config=os.environ["TF_CONFIG"])
    with open(os.path.join(config["out_dir"], "rank-%d.json" % hvd.rank()), "w") as f:
        json.dump(result, f)
    ray.train.report({"loss": result["loss"][-1]})
