"""DistributedEmbedding's pure parts: which rank owns which row (sharded_state/row_layout.py),
the message for tables that differ across ranks, and keras-rs' config fields."""

import dataclasses

import numpy as np
import pytest

from tf_hvd._keras.sharded_state.row_layout import RowLayout


@pytest.mark.parametrize("mode", ["mod", "range"])
@pytest.mark.parametrize("vocab,n", [(10, 3), (7, 2), (2, 3), (1000003, 7)])
def test_every_row_has_one_owner_and_one_place(mode, vocab, n):
    layout = RowLayout(vocab, n, mode)
    ids = np.arange(vocab)
    owner, local = layout.owner(ids), layout.local_row(ids)
    assert sum(layout.rows_on(q) for q in range(n)) == vocab
    assert max(layout.rows_on(q) for q in range(n)) - min(
        layout.rows_on(q) for q in range(n)) <= 1
    for q in range(n):
        mine = layout.global_ids(q)
        assert len(mine) == layout.rows_on(q)
        np.testing.assert_array_equal(owner[mine], q)
        np.testing.assert_array_equal(local[mine], np.arange(len(mine)))


def test_layouts_place_rows_as_documented():
    mod, rng = RowLayout(10, 3, "mod"), RowLayout(10, 3, "range")
    assert mod.owner([4, 5]).tolist() == [1, 2] and mod.local_row([4, 5]).tolist() == [1, 1]
    assert rng.global_ids(1).tolist() == [4, 5, 6]
    assert rng.owner([3, 4, 9]).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="row sharding must be one of"):
        RowLayout(10, 3, "hash")


def test_tables_mismatch_names_table_field_and_ranks():
    from tf_hvd._keras.embedding.table_checks import tables_mismatch
    same = {"tables": [("t", (10, 4, "sum", "mod", "None"))], "features": [("f", "t")]}
    other = {"tables": [("t", (10, 4, "sum", "range", "None"))], "features": [("f", "t")]}
    assert tables_mismatch("emb", [same, same]) is None
    assert tables_mismatch("emb", [same, other, same]) == (
        "DistributedEmbedding 'emb': table 't' differs across ranks: sharding='mod' on "
        "ranks 0, 2 but sharding='range' on rank 1")
    renamed = {"tables": [("u", (10, 4, "sum", "mod", "None"))], "features": [("f", "u")]}
    assert "the tables differ across ranks: ['t'] on rank 0; ['u'] on rank 1" in \
        tables_mismatch("emb", [same, renamed])


def test_table_config_has_keras_rs_fields():
    from tf_hvd.keras.layers import FeatureConfig, TableConfig
    names = [f.name for f in dataclasses.fields(TableConfig)]
    assert names[:9] == ["name", "vocabulary_size", "embedding_dim", "initializer",
                         "optimizer", "combiner", "placement", "max_ids_per_partition",
                         "max_unique_ids_per_partition"]
    assert [f.name for f in dataclasses.fields(FeatureConfig)] == [
        "name", "table", "input_shape", "output_shape"]
    table = TableConfig("t", 5, 2, combiner="sqrtn", sharding="range")
    again = TableConfig.from_config(table.get_config())
    assert (again.name, again.vocabulary_size, again.combiner, again.sharding) == (
        "t", 5, "sqrtn", "range")
