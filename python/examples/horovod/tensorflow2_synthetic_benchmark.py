# Changed besides the import line: nothing (synthetic data; no weights are downloaded). Run it under tf-keras for the Keras 2 optimizer API (opt.variables()).
#
# Horovod's examples/tensorflow2/tensorflow2_synthetic_benchmark.py (0.28), rewritten for
# tf_hvd with the same flags, structure and output:
#   TF_USE_LEGACY_KERAS=1 tfhvdrun -np 2 python tensorflow2_synthetic_benchmark.py --no-cuda
import argparse
import os
import timeit

import numpy as np
import tensorflow as tf
import tf_hvd as hvd
from tensorflow.keras import applications

# Benchmark settings
parser = argparse.ArgumentParser(description='TensorFlow Synthetic Benchmark',
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--fp16-allreduce', action='store_true', default=False,
                    help='send gradients as float16 in the allreduce')
parser.add_argument('--model', type=str, default='ResNet50',
                    help='name of a tf.keras.applications model')
parser.add_argument('--batch-size', type=int, default=32,
                    help='images per batch and process')
parser.add_argument('--num-warmup-batches', type=int, default=10,
                    help='untimed batches before the measurement')
parser.add_argument('--num-batches-per-iter', type=int, default=10,
                    help='batches timed together in one iteration')
parser.add_argument('--num-iters', type=int, default=10,
                    help='timed iterations')
parser.add_argument('--no-cuda', action='store_true', default=False,
                    help='train on the CPU')

args = parser.parse_args()
args.cuda = not args.no_cuda

# Horovod: start the collectives.
hvd.init()

# Horovod: one GPU per process, chosen by the local rank.
if args.cuda:
    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')
else:
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"

# A standard model, randomly initialised.
model = getattr(applications, args.model)(weights=None)
opt = tf.optimizers.SGD(0.01)

data = tf.random.uniform([args.batch_size, 224, 224, 3])
target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)


@tf.function
def benchmark_step(first_batch):
    # Horovod: optional gradient compression.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    with tf.GradientTape() as tape:
        probs = model(data, training=True)
        loss = tf.losses.sparse_categorical_crossentropy(target, probs)

    # Horovod: the tape averages the gradients over the processes.
    tape = hvd.DistributedGradientTape(tape, compression=compression)

    gradients = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(gradients, model.trainable_variables))

    # Horovod: after the first step (so the optimizer's state exists),
    # every process takes rank 0's weights and optimizer state.
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end='\n' if nl else '')


log('Model: %s' % args.model)
log('Batch size: %d' % args.batch_size)
device = 'GPU' if args.cuda else 'CPU'
log('Number of %ss: %d' % (device, hvd.size()))

with tf.device(device):
    # Warm-up
    log('Running warmup...')
    benchmark_step(first_batch=True)
    timeit.timeit(lambda: benchmark_step(first_batch=False),
                  number=args.num_warmup_batches)

    # Benchmark
    log('Running benchmark...')
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(lambda: benchmark_step(first_batch=False),
                             number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log('Iter #%d: %.1f img/sec per %s' % (x, img_sec, device))
        img_secs.append(img_sec)

    # Results
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log('Img/sec per %s: %.1f +-%.1f' % (device, img_sec_mean, img_sec_conf))
    log('Total img/sec on %d %s(s): %.1f +-%.1f' %
        (hvd.size(), device, hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
