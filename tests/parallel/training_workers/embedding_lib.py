"""The models and the single-process reference of the DistributedEmbedding checks.

Both sides see the same global batches (G samples a step, G divisible by 2 and
3; rank r of N takes samples ``[r*G/N, (r+1)*G/N)`` of each). The reference is
one process with plain ``keras.layers.Embedding`` tables and the plain Keras
optimizer on the whole global batch, under sparse semantics: after each Keras
update the rows (and their slots) of every table that the batch did not touch
are put back as they were, so a touched row changes by Keras' own formula and
an untouched one not at all.
"""

import keras
import numpy as np
import tensorflow as tf

G = 12          # global batch
STEPS = 4
# table: (vocabulary, dim, combiner, sharding)
TABLES = {"users": (37, 4, "mean", "mod"), "items": (29, 4, "mean", "range"),
          "tags": (23, 4, "sqrtn", "mod"), "words": (31, 3, "sum", "range")}
# fit model: "u" one-hot users, "h" [.,2] users (shared table), "i" [.,3] items
# loop model: "r" ragged tags (weighted), "s" sparse [.,4] words (weighted)
FIT_FEATURES = {"u": ("users", None), "h": ("users", 2), "i": ("items", 3)}
# loop model: "o" one-hot words, "r" ragged tags (weighted), "s" sparse [.,4] words
LOOP_FEATURES = {"o": ("words", None), "r": ("tags", 5), "s": ("words", 4)}


def optimizers():
    return {
        "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
        "adagrad": lambda: keras.optimizers.Adagrad(0.2, initial_accumulator_value=0.1),
        "adam": lambda: keras.optimizers.Adam(0.05),
        "ftrl": lambda: keras.optimizers.Ftrl(0.2, l1_regularization_strength=0.001,
                                              l2_regularization_strength=0.01),
    }


def initial_tables(seed=7):
    rs = np.random.RandomState(seed)
    return {name: (rs.randn(v, d) * 0.3).astype(np.float32)
            for name, (v, d, _, _) in TABLES.items()}


def head_init(width, seed=8):
    rs = np.random.RandomState(seed)
    return [(rs.randn(width, 1) * 0.3).astype(np.float32), np.zeros([1], np.float32)]


def fit_data(steps=STEPS, seed=11):
    """Global fit data: {feature: [steps*G, ...] ids}, labels [steps*G, 1]."""
    rs = np.random.RandomState(seed)
    x = {}
    for name, (table, k) in FIT_FEATURES.items():
        vocab = TABLES[table][0]
        # Zipf-like skew: small ids often (repeats inside a batch and across ranks)
        shape = (steps * G,) if k is None else (steps * G, k)
        x[name] = np.minimum(rs.zipf(1.3, size=shape) - 1, vocab - 1).astype(np.int32)
    y = rs.randn(steps * G, 1).astype(np.float32)
    return x, y


def loop_data(steps=STEPS, seed=12):
    """Per step: ragged ids + weights for "r", sparse ids + weights for "s" (as
    padded arrays and masks), labels."""
    rs = np.random.RandomState(seed)
    out = []
    for _ in range(steps):
        step = {"o": rs.randint(0, TABLES["words"][0], size=G).astype(np.int64)}
        for name, (table, k) in LOOP_FEATURES.items():
            if k is None:
                continue
            vocab = TABLES[table][0]
            lengths = rs.randint(0, k + 1, size=G)
            lengths[0] = k
            ids = rs.randint(0, vocab, size=(G, k)).astype(np.int64)
            mask = np.arange(k)[None, :] < lengths[:, None]
            weights = (rs.rand(G, k) + 0.5).astype(np.float32)
            step[name] = (ids, mask, weights)
        step["y"] = rs.randn(G, 1).astype(np.float32)
        out.append(step)
    return out


def rank_rows(array, n, r):
    """Rank r's samples of every global step of G."""
    b = G // n
    steps = array.shape[0] // G
    return array.reshape((steps, G) + array.shape[1:])[:, r * b:(r + 1) * b].reshape(
        (steps * b,) + array.shape[1:])


def ragged(ids, mask, weights):
    lengths = mask.sum(1)
    return (tf.RaggedTensor.from_tensor(ids, lengths=lengths),
            tf.RaggedTensor.from_tensor(weights, lengths=lengths))


def sparse(ids, mask, weights):
    where = np.argwhere(mask)
    shape = ids.shape
    return (tf.SparseTensor(where, ids[mask], shape),
            tf.SparseTensor(where, weights[mask], shape))


# -- the reference ---------------------------------------------------------------------
class Reference(object):
    """Plain Keras tables + a Dense head, trained on global batches by the plain
    Keras optimizer, rows the batch did not touch restored after each step."""

    def __init__(self, tables, features, optimizer, head):
        self.features = features
        self.tables = {name: keras.Variable(tables[name], name=name)
                       for name in sorted(set(t for t, _ in features.values()))}
        self.kernel = keras.Variable(head[0], name="kernel")
        self.bias = keras.Variable(head[1], name="bias")
        self.opt = optimizer
        self.vars = list(self.tables.values()) + [self.kernel, self.bias]
        self.opt.build(self.vars)

    def forward(self, batch):
        """``batch[name]``: ids (one-hot, dense multi-hot) or (ids, mask, weights)."""
        outs = []
        for name in sorted(self.features):
            table_name, _ = self.features[name]
            table = self.tables[table_name]
            combiner = TABLES[table_name][2]
            value = batch[name]
            if isinstance(value, tuple):
                ids, mask, weights = value
                w = tf.constant(weights * mask)
            else:
                ids = value
                w = None if ids.ndim == 1 else tf.ones(ids.shape, tf.float32)
            rows = tf.gather(tf.convert_to_tensor(table), ids)
            if w is None:
                outs.append(rows)
                continue
            total = tf.reduce_sum(rows * w[..., None], axis=1)
            if combiner == "sum":
                outs.append(total)
            elif combiner == "mean":
                outs.append(tf.math.divide_no_nan(total, tf.reduce_sum(w, 1)[:, None]))
            else:
                outs.append(tf.math.divide_no_nan(
                    total, tf.sqrt(tf.reduce_sum(w * w, 1))[:, None]))
        return tf.concat(outs, 1) @ self.kernel + self.bias

    def touched(self, batch):
        rows = {name: set() for name in self.tables}
        for name, (table_name, _) in self.features.items():
            value = batch[name]
            if isinstance(value, tuple):
                ids, mask, _ = value
                rows[table_name].update(ids[mask].ravel().tolist())
            else:
                rows[table_name].update(np.asarray(value).ravel().tolist())
        return rows

    def slots(self, table_name):
        table = self.tables[table_name]
        return [v for v in self.opt.variables
                if tuple(v.shape) == tuple(table.shape) and v is not table]

    def step(self, batch, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.forward(batch) - y))
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, self.vars)]
        saved = {name: [keras.ops.convert_to_numpy(v) for v in [t] + self.slots(name)]
                 for name, t in self.tables.items()}
        self.opt.apply(grads, self.vars)
        for name, rows in self.touched(batch).items():
            keep = np.ones(self.tables[name].shape[0], bool)
            keep[sorted(rows)] = False
            for v, before in zip([self.tables[name]] + self.slots(name), saved[name]):
                now = keras.ops.convert_to_numpy(v)
                now[keep] = before[keep]
                v.assign(now)
        return float(loss)
