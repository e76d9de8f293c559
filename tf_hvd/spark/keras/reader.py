"""A rank's share of the Parquet data as a tf.data pipeline (pyarrow; no Petastorm).

The files Spark wrote are dealt out to the ranks (file i to rank i % size); when there
are fewer files than ranks, every rank reads them all and keeps rows rank::size. The
pipeline repeats without end: every rank runs the same ``steps_per_epoch`` (from the
row count), so no rank waits at an epoch's end for a peer that ran out of data.

    ds = dataset(files, rank=0, size=2, feature_cols=["features"], label_cols=["label"],
                 batch_size=32, shuffle=True, seed=1)
"""

import numpy as np


def share(files, rank, size):
    """(the files rank ``rank`` reads, row stride or None)."""
    if len(files) >= size:
        return files[rank::size], None
    return list(files), (rank, size)


def _column(table, name):
    """One column as float32 (rows x values) or (rows,)."""
    import pyarrow as pa
    array = table.column(name).combine_chunks()
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        lengths = np.unique(array.value_lengths().to_numpy(zero_copy_only=False))
        if len(lengths) > 1:
            raise ValueError("column %r holds arrays of different lengths %s; every row "
                             "must have the same shape" % (name, lengths.tolist()))
        width = int(lengths[0]) if len(lengths) else 0
        return array.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(
            len(array), width)
    return array.to_numpy(zero_copy_only=False).astype(np.float32)


def load_arrays(files, rank, size, columns, filesystem=None):
    """{column: numpy array} of this rank's rows."""
    import pyarrow.parquet as pq
    mine, stride = share(files, rank, size)
    tables = [pq.read_table(f, columns=list(columns), filesystem=filesystem) for f in mine]
    if not tables:
        return {c: np.zeros((0,), np.float32) for c in columns}
    import pyarrow as pa
    table = pa.concat_tables(tables)
    arrays = {c: _column(table, c) for c in columns}
    if stride is not None:
        arrays = {c: a[stride[0]::stride[1]] for c, a in arrays.items()}
    return arrays


def _structure(arrays, cols):
    return arrays[cols[0]] if len(cols) == 1 else tuple(arrays[c] for c in cols)


def dataset(arrays, feature_cols, label_cols, batch_size, shuffle, seed,
            sample_weight_col=None, repeat=True, shuffle_buffer_size=None):
    """A batched tf.data.Dataset of (features, labels[, sample weights])."""
    import tensorflow as tf
    parts = [_structure(arrays, feature_cols), _structure(arrays, label_cols)]
    if sample_weight_col:
        parts.append(arrays[sample_weight_col])
    ds = tf.data.Dataset.from_tensor_slices(tuple(parts))
    rows = len(arrays[feature_cols[0]])
    if shuffle and rows and shuffle_buffer_size != 0:
        ds = ds.shuffle(min(rows, shuffle_buffer_size or rows), seed=seed,
                        reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
