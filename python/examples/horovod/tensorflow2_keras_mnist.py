# Changed besides the import lines: MNIST comes from offline_mnist (scikit-learn's digits in MNIST's format, no download); the Keras version test reads tf.__version__ (tf-keras 2.21's tf.keras has no __version__); EXAMPLE_EPOCHS and EXAMPLE_STEPS_PER_EPOCH may shorten the run (defaults are Horovod's 24 and 500 // size).
#
# Horovod's examples/tensorflow2/tensorflow2_keras_mnist.py (0.28), rewritten for
# tf_hvd with the same structure and behaviour. Run it as Horovod's, under tf-keras:
#   TF_USE_LEGACY_KERAS=1 tfhvdrun -np 2 python tensorflow2_keras_mnist.py
import os
import sys

import tensorflow as tf

import tf_hvd as horovod
import tf_hvd.keras as hvd

import offline_mnist

from packaging import version
# Keras >= 2.11 moved the OptimizerV2 classes that this example uses to .legacy.
if version.parse(tf.__version__) < version.parse("2.11"):
    from tensorflow.keras import optimizers
else:
    from tensorflow.keras.optimizers import legacy as optimizers


def main():
    # Horovod: start the collectives.
    hvd.init()

    # Horovod: one GPU per process, chosen by the local rank.
    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')

    (mnist_images, mnist_labels), _ = \
        offline_mnist.load_data(path='mnist-%d.npz' % hvd.rank())

    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.cast(mnist_images[..., tf.newaxis] / 255.0, tf.float32),
         tf.cast(mnist_labels, tf.int64)))
    dataset = dataset.repeat().shuffle(10000).batch(128)

    mnist_model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, [3, 3], activation='relu'),
        tf.keras.layers.Conv2D(64, [3, 3], activation='relu'),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation='relu'),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation='softmax')
    ])

    # Horovod: the learning rate grows with the number of processes.
    scaled_lr = 0.001 * hvd.size()
    opt = optimizers.Adam(scaled_lr)

    # Horovod: average the gradients over the processes.
    opt = hvd.DistributedOptimizer(
        opt, backward_passes_per_step=1, average_aggregated_gradients=True)

    # Horovod: experimental_run_tf_function=False makes TensorFlow use the
    # DistributedOptimizer's gradients.
    mnist_model.compile(loss=tf.losses.SparseCategoricalCrossentropy(),
                        optimizer=opt,
                        metrics=['accuracy'],
                        experimental_run_tf_function=False)

    callbacks = [
        # Horovod: every process starts from rank 0's weights and optimizer
        # state (random initialisation or a restored checkpoint).
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),

        # Horovod: epoch metrics are averaged over the processes; keep it
        # before callbacks that read metrics.
        hvd.callbacks.MetricAverageCallback(),

        # Horovod: ramp the learning rate from scaled_lr / size to scaled_lr
        # over the first three epochs (https://arxiv.org/abs/1706.02677).
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=3, verbose=1),
    ]

    # Horovod: only rank 0 writes checkpoints, so no two processes write one file.
    if hvd.rank() == 0:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint('./checkpoint-{epoch}.h5'))

    # Horovod: only rank 0 prints progress.
    verbose = 1 if hvd.rank() == 0 else 0

    # Train. Horovod: fewer steps per process as the processes grow.
    epochs = int(os.environ.get('EXAMPLE_EPOCHS', 24))
    steps = int(os.environ.get('EXAMPLE_STEPS_PER_EPOCH', 500 // hvd.size()))
    mnist_model.fit(dataset, steps_per_epoch=steps, callbacks=callbacks, epochs=epochs, verbose=verbose)


if __name__ == '__main__':
    if len(sys.argv) == 4:
        # started through the Python launch API
        np = int(sys.argv[1])
        hosts = sys.argv[2]
        comm = sys.argv[3]
        print('Running training through horovod.run')
        horovod.run(main, np=np, hosts=hosts, use_gloo=comm == 'gloo', use_mpi=comm == 'mpi')
    else:
        # started by tfhvdrun (horovodrun)
        main()
