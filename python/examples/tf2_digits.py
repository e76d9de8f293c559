"""TF2 custom training loop (tf.function + DistributedGradientTape) on
scikit-learn's digits, data-parallel with tf_hvd.

    tfhvdrun -np 2 python python/examples/tf2_digits.py

Reaches a test accuracy of at least 0.95 at np=2 with the defaults (15 epochs).
"""

import argparse
import os

import keras
import tensorflow as tf

import tf_hvd as hvd
from digits_data import epoch_batches, load


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.001, help="for one process")
    parser.add_argument("--checkpoint-dir", default="checkpoints/tf2_digits")
    args = parser.parse_args()

    # Horovod: initialize.
    hvd.init()
    (x_train, y_train), (x_test, y_test) = load(hvd.rank(), hvd.size())
    keras.utils.set_random_seed(1234 + hvd.rank())

    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # Horovod: scale the learning rate by the number of workers.
    opt = keras.optimizers.Adam(args.lr * hvd.size())

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # Horovod: the tape's gradients are averaged over all ranks.
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def accuracy(images, labels):
        predicted = tf.argmax(model(images, training=False), axis=1, output_type=tf.int32)
        return tf.reduce_mean(tf.cast(tf.equal(predicted, labels), tf.float32))

    checkpoint = tf.train.Checkpoint(model=model, optimizer=opt)
    first_step = True
    for epoch in range(args.epochs):
        losses = []
        for batch in epoch_batches(len(x_train), args.batch_size, epoch):
            losses.append(train_step(x_train[batch], y_train[batch]))
            if first_step:
                # Horovod: after the first step (so the optimizer's variables
                # exist), every rank takes rank 0's weights and optimizer state.
                hvd.broadcast_variables(model.variables + opt.variables, root_rank=0)
                first_step = False
        # The mean training loss over all ranks (every rank must call this).
        epoch_loss = hvd.allreduce(tf.reduce_mean(losses), name="epoch_loss")
        test_acc = accuracy(x_test, y_test)
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f, test accuracy %.4f"
                  % (epoch + 1, float(epoch_loss), float(test_acc)))
            # Horovod: save checkpoints only on rank 0.
            checkpoint.write(os.path.join(args.checkpoint_dir, "checkpoint"))

    test_acc = float(accuracy(x_test, y_test))
    if hvd.rank() == 0:
        print("test accuracy: %.4f" % test_acc)


if __name__ == "__main__":
    main()
