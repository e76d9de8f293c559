"""The MLP's plain step and its grouped step (one grouped allreduce of the 2.68 MB of
gradients), interleaved in 4 rounds of 150 steps; rank 0 prints the medians (ms).

    tfhvdrun -np 2 python by_hand_grouped_step.py
"""
import os, sys, time, numpy as np, tensorflow as tf, keras, tf_hvd as hvd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # python/benchmarks
import training_bench
hvd.init()
keras.utils.set_random_seed(1234)
model = training_bench.build_model("mlp")
opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
x_np, y_np = training_bench.synthetic_arrays("mlp", 64, seed=100 + hvd.rank())
x, y = tf.constant(x_np), tf.constant(y_np)
def make(grouped):
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        if grouped:
            tape = hvd.DistributedGradientTape(tape, num_groups=1)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step
steps = {"plain": make(False), "grouped": make(True)}
for s in steps.values():
    for _ in range(20): s()
res = {k: [] for k in steps}
for r in range(4):
    for k, s in steps.items():
        hvd.allreduce(tf.constant(0.0), name="barrier")
        t = time.perf_counter()
        for _ in range(150): out = s()
        out.numpy()
        res[k].append((time.perf_counter() - t) / 150 * 1e3)
if hvd.rank() == 0:
    p, g = np.median(res["plain"]), np.median(res["grouped"])
    print("STEP plain %.2f grouped %.2f ratio %.3f" % (p, g, p / g))
