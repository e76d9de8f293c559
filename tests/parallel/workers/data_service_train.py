"""Training job of test_data_service: reads the compute job's config, takes data from
its tf.data service, trains a tiny model and prints one RESULT line per rank.

argv: CONFIGFILE N
"""

import json
import sys

import tensorflow as tf
import keras

import tf_hvd as hvd
from tf_hvd.data.compute_service import TfDataServiceConfig, tf_data_service

hvd.init()
configfile, n = sys.argv[1], int(sys.argv[2])
config = TfDataServiceConfig.read(configfile, wait_for_file_creation=True)
rank, size = hvd.rank(), hvd.size()
with tf_data_service(config, rank) as dispatcher:
    pass  # the dispatcher this rank uses (rank r uses dispatcher r when there are several)

# 1. One job shared by the ranks of a dispatcher ("distributed_epoch"): each element
#    reaches one of them.
shared = tf.data.Dataset.range(n).send_to_data_service(config, rank, size, reuse_dataset=True)
shared_ids = [int(i) for i in shared.as_numpy_iterator()]
hvd.barrier()

# 2. A job per rank: each rank gets the whole dataset, the mapping runs on the workers,
#    the batching locally; equal step counts on every rank.
def example(i):
    x = tf.cast(i, tf.float32) / n
    return tf.reshape(x, [1]), tf.reshape(3.0 * x - 1.0, [1]), i

ds = tf.data.Dataset.range(n).map(example).send_to_data_service(config, rank, size).batch(8)
model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
optimizer = keras.optimizers.SGD(0.5)
hvd.broadcast_variables(model.variables, root_rank=0)
initial = [w.tolist() for w in model.get_weights()]
train_ids, losses = [], []
for x, y, ids in ds:
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    train_ids.extend(int(i) for i in ids.numpy())
    losses.append(float(loss))

hvd.barrier()
if rank == 0:
    config.compute_client().shutdown()
print("RESULT " + json.dumps({
    "rank": rank, "dispatcher": dispatcher, "shared_ids": shared_ids,
    "train_ids": train_ids, "steps": len(losses),
    "initial": initial, "weights": [w.tolist() for w in model.get_weights()],
    "losses": losses}), flush=True)
