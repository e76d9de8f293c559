# Changed besides the import lines: MNIST comes from offline_mnist (scikit-learn's digits in MNIST's format, no download); EXAMPLE_STEPS may shorten the run (default is Horovod's 10000 // size).
#
# Horovod's examples/tensorflow2/tensorflow2_mnist.py (0.28), rewritten for tf_hvd
# with the same structure and behaviour (a tf.GradientTape loop). Run it under tf-keras:
#   TF_USE_LEGACY_KERAS=1 tfhvdrun -np 2 python tensorflow2_mnist.py
import os
import sys

import tensorflow as tf

import tf_hvd as horovod
import tf_hvd as hvd

import offline_mnist


def train():
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
    loss = tf.losses.SparseCategoricalCrossentropy()

    # Horovod: the learning rate grows with the number of processes.
    opt = tf.optimizers.Adam(0.001 * hvd.size())

    checkpoint_dir = './checkpoints'
    checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            probs = mnist_model(images, training=True)
            loss_value = loss(labels, probs)

        # Horovod: the tape averages the gradients over the processes.
        tape = hvd.DistributedGradientTape(tape)

        grads = tape.gradient(loss_value, mnist_model.trainable_variables)
        opt.apply_gradients(zip(grads, mnist_model.trainable_variables))

        # Horovod: after the first step (so the optimizer's state exists),
        # every process takes rank 0's weights and optimizer state.
        if first_batch:
            hvd.broadcast_variables(mnist_model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)

        return loss_value

    # Horovod: fewer steps per process as the processes grow.
    steps = int(os.environ.get('EXAMPLE_STEPS', 10000 // hvd.size()))
    for batch, (images, labels) in enumerate(dataset.take(steps)):
        loss_value = training_step(images, labels, batch == 0)

        if batch % 10 == 0 and hvd.local_rank() == 0:
            print('Step #%d\tLoss: %.6f' % (batch, loss_value))

    # Horovod: only rank 0 writes the checkpoint.
    if hvd.rank() == 0:
        checkpoint.save(checkpoint_dir)
        return mnist_model


if __name__ == '__main__':
    if len(sys.argv) == 4:
        # started through the Python launch API
        np = int(sys.argv[1])
        hosts = sys.argv[2]
        comm = sys.argv[3]
        print('Running training through horovod.run')
        models = horovod.run(train, np=np, hosts=hosts, use_gloo=comm == 'gloo', use_mpi=comm == 'mpi', verbose=2)
    else:
        # started by tfhvdrun (horovodrun)
        train()
