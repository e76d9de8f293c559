"""TensorFlow's "Multi-worker training with Keras" tutorial (main.py), on tf_hvd.

The tutorial's main.py builds a tf.distribute.MultiWorkerMirroredStrategy from TF_CONFIG
and fits inside strategy.scope(). Here hvd.init() joins the same job (TF_CONFIG's chief
first, then its workers by index; or tfhvdrun's ranks; or one process alone),
each worker reads its own shard, the optimizer is wrapped in hvd.DistributedOptimizer, and
only the chief (rank 0) writes checkpoints and the saved model.

    # two workers on this machine, started as the tutorial starts them
    export HOROVOD_GLOO_RENDEZVOUS_SECRET=$(python -c "import secrets; print(secrets.token_hex(32))")
    TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 0}}' python main.py &
    TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 1}}' python main.py

    tfhvdrun -np 2 python main.py      # the same job, started by tf_hvd's launcher
    python main.py                     # one process

Every worker ends with one line, e.g. ``rank 1 of 2: loss 2.0 -> 0.3, test accuracy 0.93,
weights sha256 5f0c...``: the weights' checksum is the same on every rank.
"""

import argparse
import hashlib
import os

import numpy as np
import keras

import tf_hvd.keras as hvd
import mnist_setup


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-worker-batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=70)
    parser.add_argument("--learning-rate", type=float, default=0.05,
                        help="for one worker; scaled by the number of workers")
    parser.add_argument("--model-dir", default="/tmp/keras-model",
                        help="where the chief writes checkpoint.keras and model.keras")
    parser.add_argument("--seed", type=int, default=1234)
    return parser.parse_args()


def _is_chief():
    # The tutorial's _is_chief(task_type, task_id) reads the cluster resolver; tf_hvd's
    # ranks put TF_CONFIG's chief (or worker 0 when there is no chief) at rank 0.
    return hvd.rank() == 0


def weights_checksum(model):
    """sha256 of the model's weights as float32 bytes: equal on ranks in sync."""
    digest = hashlib.sha256()
    for w in model.get_weights():
        digest.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return digest.hexdigest()


def main():
    args = parse_args()

    # tf_hvd: replaces `strategy = tf.distribute.MultiWorkerMirroredStrategy()`. Reads
    # TF_CONFIG when a platform or the user set it (raises SchedulerEnvError in a ps or
    # evaluator task), else tfhvdrun's, mpirun's, Slurm's or torchrun's variables.
    hvd.init()
    print("worker rank %d of %d (local rank %d of %d)" % (
        hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()), flush=True)

    per_worker_batch_size = args.per_worker_batch_size
    num_workers = hvd.size()        # the tutorial: len(tf_config['cluster']['worker'])

    # Each step consumes per_worker_batch_size examples on every worker. MWMS batches the
    # dataset at the global size and splits each batch; here every worker batches its own
    # shard at the per-worker size (tf_hvd does not shard for you).
    global_batch_size = per_worker_batch_size * num_workers
    multi_worker_dataset = mnist_setup.mnist_dataset(
        per_worker_batch_size, num_shards=num_workers, shard_index=hvd.rank())

    # tf_hvd: no strategy.scope(). The gradients are averaged over the global batch, which
    # grew num_workers times: scale the learning rate the same way (Horovod's convention),
    # and wrap the optimizer. Each rank starts from its own random weights on purpose:
    # BroadcastGlobalVariablesCallback gives every rank rank 0's.
    keras.utils.set_random_seed(args.seed + hvd.rank())
    optimizer = hvd.DistributedOptimizer(
        keras.optimizers.SGD(learning_rate=args.learning_rate * num_workers))
    multi_worker_model = mnist_setup.build_and_compile_cnn_model(optimizer)

    callbacks = [
        # tf_hvd: every rank continues from rank 0's weights after the first batch.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # tf_hvd: the epoch's loss and accuracy averaged over the workers (MWMS logs
        # those of the global batch).
        hvd.callbacks.MetricAverageCallback(),
    ]
    # The tutorial writes on every worker (non-chiefs into temporary directories they
    # delete afterwards), because MWMS's save runs collectives. tf_hvd's does not: only
    # the chief writes.
    if _is_chief():
        os.makedirs(args.model_dir, exist_ok=True)
        callbacks.append(keras.callbacks.ModelCheckpoint(
            os.path.join(args.model_dir, "checkpoint.keras")))
        print("global batch size %d (%d per worker x %d workers), learning rate %g" % (
            global_batch_size, per_worker_batch_size, num_workers,
            args.learning_rate * num_workers), flush=True)

    history = multi_worker_model.fit(multi_worker_dataset, epochs=args.epochs,
                                     steps_per_epoch=args.steps_per_epoch,
                                     callbacks=callbacks, verbose=2 if _is_chief() else 0)

    # Every worker evaluates the whole test set with the same weights: the same result.
    _, accuracy = multi_worker_model.evaluate(mnist_setup.test_dataset(), verbose=0)
    if _is_chief():
        multi_worker_model.save(os.path.join(args.model_dir, "model.keras"))
    losses = history.history["loss"]
    print("rank %d of %d: loss %.4f -> %.4f, test accuracy %.4f, weights sha256 %s" % (
        hvd.rank(), hvd.size(), losses[0], losses[-1], accuracy,
        weights_checksum(multi_worker_model)), flush=True)


if __name__ == "__main__":
    main()
