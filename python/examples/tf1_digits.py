"""TF1 graph mode (tf.compat.v1: placeholders, opt.minimize,
MonitoredTrainingSession) on scikit-learn's digits, data-parallel with tf_hvd.

    tfhvdrun -np 2 python python/examples/tf1_digits.py

Reaches a test accuracy of at least 0.95 at np=2 with the defaults (15 epochs).
"""

import argparse

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

import tf_hvd as hvd  # noqa: E402
from digits_data import epoch_batches, load  # noqa: E402

v1 = tf.compat.v1


def build_model(seed):
    images = v1.placeholder(tf.float32, [None, 64], name="images")
    labels = v1.placeholder(tf.int32, [None], name="labels")
    init = v1.glorot_uniform_initializer(seed=seed)
    hidden = images
    for i, width in enumerate((128, 64)):
        w = v1.get_variable("w%d" % i, [hidden.shape[1], width], initializer=init)
        b = v1.get_variable("b%d" % i, [width], initializer=v1.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(hidden, w) + b)
    w = v1.get_variable("w_out", [64, 10], initializer=init)
    b = v1.get_variable("b_out", [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(hidden, w) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    correct = tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), labels)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    return images, labels, loss, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.001, help="for one process")
    parser.add_argument("--checkpoint-dir", default="checkpoints/tf1_digits")
    args = parser.parse_args()

    # Horovod: initialize.
    hvd.init()
    (x_train, y_train), (x_test, y_test) = load(hvd.rank(), hvd.size())

    # Different initial weights on every rank: the broadcast hook fixes that.
    images, labels, loss, accuracy = build_model(seed=1234 + hvd.rank())
    global_step = v1.train.get_or_create_global_step()
    # Horovod: scale the learning rate by the number of workers, wrap the optimizer.
    opt = hvd.DistributedOptimizer(v1.train.AdamOptimizer(args.lr * hvd.size()))
    train_op = opt.minimize(loss, global_step=global_step)

    # Horovod: broadcast rank 0's variables once the session exists.
    hooks = [hvd.BroadcastGlobalVariablesHook(0)]
    # Horovod: save checkpoints only on rank 0.
    checkpoint_dir = args.checkpoint_dir if hvd.rank() == 0 else None
    steps_per_epoch = len(x_train) // args.batch_size
    with v1.train.MonitoredTrainingSession(checkpoint_dir=checkpoint_dir, hooks=hooks,
                                           save_checkpoint_steps=steps_per_epoch,
                                           save_summaries_steps=None,
                                           log_step_count_steps=None) as sess:
        for epoch in range(args.epochs):
            losses = []
            for batch in epoch_batches(len(x_train), args.batch_size, epoch):
                _, value = sess.run([train_op, loss],
                                    {images: x_train[batch], labels: y_train[batch]})
                losses.append(value)
            test_acc = sess.run(accuracy, {images: x_test, labels: y_test})
            if hvd.rank() == 0:
                print("epoch %d: local loss %.4f, test accuracy %.4f"
                      % (epoch + 1, float(np.mean(losses)), test_acc))
        test_acc = sess.run(accuracy, {images: x_test, labels: y_test})
    if hvd.rank() == 0:
        print("test accuracy: %.4f" % test_acc)


if __name__ == "__main__":
    main()
