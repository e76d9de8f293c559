"""A sharded table's initial rows: row ``i`` depends on the initializer, its seed and
``i``, never on the number of ranks, so a seeded run repeats at another size.

Each rank once drew its own ``[rows_on(rank), dim]`` slice with the initializer, so
the same seed gave other rows at np=2 than at np=3. Now every rank draws the whole
table, one block of rows at a time, and keeps its rows of each block:

* the blocks are ``block_rows(dim)`` rows (``2**25`` elements: a table of at most that
  many elements is one block, drawn in one call exactly as keras-rs' layer and
  ``keras.layers.Embedding`` draw their ``[vocabulary_size, dim]`` table);
* block 0 uses the initializer as given; block ``b > 0`` the same initializer with a
  seed derived from (seed, ``b``). Keras' seeded random initializers are stateless and
  draw a shape's elements in order, so block 0 is also the first rows of the one-call
  draw of the whole table;
* a VarianceScaling initializer (Glorot, He, LeCun) scales by the whole table's fans,
  not a block's.

An unseeded initializer draws with a seed of its own in each process (as Keras does),
so its rows differ from run to run whatever the size; a ``keras.random.SeedGenerator``
seed is stateful and is used as it is (block by block). A non-random initializer (zeros,
a constant) or any callable is called for each block's shape::

    rows = initial_rows(keras.initializers.RandomUniform(seed=7), 1000, 16,
                        layout.global_ids(rank), "float32")   # [rows_on(rank), 16]
"""

import zlib

import numpy as np
import tensorflow as tf

ELEMENTS_PER_BLOCK = 1 << 25


def block_rows(dim):
    """Rows per block of a table ``dim`` wide (a constant of the table, not the ranks)."""
    return max(1, ELEMENTS_PER_BLOCK // max(1, int(dim)))


def _derived_seed(seed, block):
    # a fixed function of (seed, block): the same on every rank and at every size
    return zlib.crc32(("%d:%d" % (int(seed), int(block))).encode()) & 0x7FFFFFFF


def _fan(mode, rows, dim):
    fan = {"fan_in": rows, "fan_out": dim}.get(mode, (rows + dim) / 2.0)
    return max(1.0, float(fan))


def _block_initializer(init, block, rows, table_shape):
    """``init`` for block ``block`` of ``rows`` rows of a ``table_shape`` table (a
    copy where it differs: the user's initializer is never changed)."""
    import keras
    original = init
    seed = getattr(init, "seed", None)
    if block > 0 and isinstance(seed, (int, np.integer)):
        init = type(init).from_config(dict(init.get_config(),
                                           seed=_derived_seed(seed, block)))
    if (isinstance(init, keras.initializers.VarianceScaling) and rows != table_shape[0]
            and getattr(init, "input_axes", None) is None
            and getattr(init, "output_axes", None) is None):
        if init is original:
            init = type(init).from_config(init.get_config())
            init.seed = original.seed   # an unseeded one keeps the seed it drew
        dim = table_shape[1]
        init.scale = original.scale * _fan(init.mode, rows, dim) / _fan(
            init.mode, table_shape[0], dim)
    return init


def initial_rows(initializer, vocabulary_size, dim, global_ids, dtype):
    """The initial value (a tensor ``[len(global_ids), dim]``) of rows ``global_ids``
    (increasing) of a ``[vocabulary_size, dim]`` table made by ``initializer`` (an
    initializer, its name, or a callable ``(shape, dtype)``)."""
    import keras
    init = keras.initializers.get(initializer)
    vocabulary_size, dim = int(vocabulary_size), int(dim)
    ids = np.asarray(global_ids, dtype=np.int64)
    step = block_rows(dim)
    parts = []
    for block, lo in enumerate(range(0, vocabulary_size, step)):
        hi = min(vocabulary_size, lo + step)
        wanted = ids[(ids >= lo) & (ids < hi)] - lo
        if not len(wanted):
            continue
        block_init = _block_initializer(init, block, hi - lo, (vocabulary_size, dim))
        values = tf.convert_to_tensor(block_init((hi - lo, dim), dtype=dtype))
        parts.append(values if len(wanted) == hi - lo else tf.gather(values, wanted))
    if not parts:
        return tf.zeros([0, dim], dtype=dtype)
    return parts[0] if len(parts) == 1 else tf.concat(parts, 0)
