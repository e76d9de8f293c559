"""Checks of tf_hvd.keras.layers.DistributedEmbedding (tables sharded over the ranks).
Run under the launcher; every rank runs the sections chosen by TRAINING_ONLY:

    python -m tf_hvd.runner -np 2 python tests/parallel/training_workers/train_embedding.py DIR

fit          model.fit with hvd.DistributedOptimizer (SGD+momentum, Adagrad, Adam,
             Ftrl): a one-hot and two multi-hot features (mean) over a "mod" and a
             "range" table, one table shared by two features; tables, slots and
             dense weights after 4 steps equal the single-process reference
             (embedding_lib.Reference: plain Embedding, sparse semantics)
loop         a tf.function loop with DistributedGradientTape: a one-hot, a ragged
             (sqrtn) and a sparse (sum) weighted feature, Adam and Ftrl, equal to the
             reference (at np=3 fit runs SGD+momentum and Adagrad only);
             each rank holds only its rows; nothing was broadcast over the tables
bad_input    an id outside a table (every rank: InvalidArgumentError naming table,
             id and rank), default_row, tables differing across ranks, optimizers
             that cannot update rows (ShardingError naming them)
initial      seeded tables ("mod" and "range"; uniform, glorot, truncated normal) built
             at this np and gathered whole equal one process's (a layer built as np=1
             in the rank) and keras-rs' CPU layer's; tables of several blocks too; at
             np=2 rank 0 keeps them as DIR/initial_np2.npz, at np=3 they equal those
ckpt_save    3 Adam steps, hvd.save_model (whole tables) to DIR/emb.keras and
             save_embedding_shards to DIR/shards (step 0 of the commit protocol), the
             state as DIR/emb_state.npz; 3 more steps, the result as DIR/emb_after.npz;
             a second save that rank 1 cannot write (ENOSPC) fails on both ranks naming
             rank 1 and leaves a half-written step 1; a fresh model loads step 0 (the
             half-written step ignored, with rank 0's warning); a flipped byte is a
             CheckpointError naming the file, a table of another size a ShardingError
             naming it; the earlier layout (manifest.json in the directory) still loads
ckpt_resume  at this np: hvd.load_model(DIR/emb.keras) and a fresh model +
             load_embedding_shards(DIR/shards) hold the saved state (step 0, not the
             half-written step 1); 3 more steps from the file equal DIR/emb_after.npz
ckpt_plain   (last) tf_hvd shut down, rank 0 alone: keras.models.load_model reads
             DIR/emb.keras, whole tables equal to the saved ones
"""

import errno
import json
import logging
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402
import tf_hvd.keras as hk  # noqa: E402
from tf_hvd.checkpoint import commit  # noqa: E402
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError, ShardingError  # noqa: E402
from tf_hvd.keras.layers import (DistributedEmbedding, FeatureConfig, TableConfig,  # noqa: E402
                                 load_embedding_shards, save_embedding_shards)
from tf_hvd._keras import ranks  # noqa: E402
from tf_hvd._keras.sharded_state import initial_rows  # noqa: E402
import embedding_lib as lib  # noqa: E402
from trainlib import Checks  # noqa: E402

hk.init()
N, R = hk.size(), hk.rank()
B = lib.G // N
C = Checks(hk)
DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="train_embedding_")


def table_configs(names):
    return {name: TableConfig(name, v, d, combiner=c, sharding=s, initializer="zeros")
            for name, (v, d, c, s) in lib.TABLES.items() if name in names}


def make_layer(features, name="emb"):
    tables = table_configs(set(t for t, _ in features.values()))
    configs = {f: FeatureConfig(f, tables[t], (None,) if k is None else (None, k),
                                (None, tables[t].embedding_dim))
               for f, (t, k) in features.items()}
    return DistributedEmbedding(configs, name=name)


def fit_model():
    inputs = {f: keras.Input((() if k is None else (k,)), dtype="int32", name=f)
              for f, (_, k) in lib.FIT_FEATURES.items()}
    emb = make_layer(lib.FIT_FEATURES)
    out = emb(inputs)
    head = keras.layers.Dense(1, name="head")
    y = head(keras.layers.Concatenate()([out[f] for f in sorted(out)]))
    model = keras.Model(inputs, y)
    tables = lib.initial_tables()
    for name in emb.table_names():
        emb.set_table(name, tables[name])
    head.set_weights(lib.head_init(12))
    return model, emb, head


def compare(label, emb, head, ref):
    for name in emb.table_names():
        C.close("%s table %s" % (label, name), [emb.get_table(name)],
                [keras.ops.convert_to_numpy(ref.tables[name])])
        state = emb._hvd.tables[name]
        mine = [emb.get_slot(name, s) for s in state.rule.slot_names]
        C.close("%s slots %s %s" % (label, name, state.rule.slot_names), mine,
                [keras.ops.convert_to_numpy(v) for v in ref.slots(name)])
        C.equal("%s rows held %s" % (label, name), tuple(state.shard.shape),
                (state.layout.rows_on(R), lib.TABLES[name][1]))
    C.close("%s head" % label, head.get_weights(),
            [keras.ops.convert_to_numpy(ref.kernel), keras.ops.convert_to_numpy(ref.bias)])


def fit_reference(make_opt, x, y, steps):
    ref = lib.Reference(lib.initial_tables(), lib.FIT_FEATURES, make_opt(), lib.head_init(12))
    for s in range(steps):
        sl = slice(s * lib.G, (s + 1) * lib.G)
        ref.step({f: v[sl] for f, v in x.items()}, y[sl])
    return ref


def section_fit():
    x, y = lib.fit_data()
    mine = {f: lib.rank_rows(v, N, R) for f, v in x.items()}
    # np=3 fits with two of the optimizers; the loop covers the other two there
    chosen = list(lib.optimizers()) if N == 2 else ["sgd_momentum", "adagrad"]
    for opt_name in chosen:
        make_opt = lib.optimizers()[opt_name]
        model, emb, head = fit_model()
        model.compile(optimizer=hk.DistributedOptimizer(make_opt()), loss="mse")
        model.fit(mine, lib.rank_rows(y, N, R), batch_size=B, epochs=1, shuffle=False,
                  verbose=0, callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0)])
        compare("fit %s" % opt_name, emb, head, fit_reference(make_opt, x, y, lib.STEPS))
        C.equal("fit %s iterations" % opt_name, int(model.optimizer.iterations.numpy()),
                lib.STEPS)


def section_loop():
    data = lib.loop_data()
    rows = slice(R * B, (R + 1) * B)
    for opt_name in ("adam", "ftrl"):
        make_opt = lib.optimizers()[opt_name]
        emb = make_layer(lib.LOOP_FEATURES)
        head = keras.layers.Dense(1)
        emb.build(None)
        head.build((None, 10))
        tables = lib.initial_tables()
        for name in emb.table_names():
            emb.set_table(name, tables[name])
        head.set_weights(lib.head_init(10))
        variables = emb.trainable_variables + head.trainable_variables
        opt = hk.DistributedOptimizer(make_opt())

        @tf.function
        def step(o_ids, r_ids, r_w, s_ids, s_w, y):
            with tf.GradientTape() as tape:
                out = emb({"o": o_ids, "r": r_ids, "s": s_ids},
                          weights={"o": None, "r": r_w, "s": s_w})
                pred = head(tf.concat([out["o"], out["r"], out["s"]], 1))
                loss = tf.reduce_mean(tf.square(pred - y))
            tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            return loss

        ref = lib.Reference(lib.initial_tables(), lib.LOOP_FEATURES, make_opt(),
                            lib.head_init(10))
        for batch in data:
            r_ids, r_w = lib.ragged(*[a[rows] for a in batch["r"]])
            s_ids, s_w = lib.sparse(*[a[rows] for a in batch["s"]])
            step(batch["o"][rows], r_ids, r_w, s_ids, s_w, batch["y"][rows])
            ref.step({"o": batch["o"], "r": batch["r"], "s": batch["s"]}, batch["y"])
        compare("loop %s" % opt_name, emb, head, ref)


def section_bad_input():
    small = TableConfig("small", 10, 2, combiner="sum", initializer="ones")
    emb = DistributedEmbedding(FeatureConfig("f", small, (None, 2), (None, 2)), name="bad")
    ids = np.array([[1, 2], [3, 4]])
    if R == N - 1:
        ids[1, 1] = 12
    C.raises("id outside the vocabulary", lambda: emb(ids), tf.errors.InvalidArgumentError,
             ["DistributedEmbedding 'bad'", "table 'small'", "id 12",
              "rank %d" % (N - 1), "[0, 10)"])
    ids[1, 1] = -3 if R == 0 else 4
    C.raises("negative id", lambda: emb(ids), tf.errors.InvalidArgumentError,
             ["table 'small'", "id -3", "rank 0"])
    C.close("the layer works after a bad id", [emb(np.array([[1, 2]]))],
            [np.full((1, 2), 2.0, np.float32)])
    deflt = DistributedEmbedding(FeatureConfig("f", small, (None,), (None, 2)),
                                 default_row=3, name="deflt")
    deflt.build(None)
    deflt.set_table("small", np.arange(20, dtype=np.float32).reshape(10, 2))
    C.close("default_row", [deflt(np.array([1, 99, -1, 3]))],
            [np.array([[2, 3], [6, 7], [6, 7], [6, 7]], np.float32)])
    vocab = 11 if R == 1 else 10
    other = TableConfig("cfg", vocab, 2)
    differ = DistributedEmbedding(FeatureConfig("f", other, (None,), (None, 2)), name="differ")
    C.raises("tables differing across ranks", lambda: differ(np.array([1])), ShardingError,
             ["table 'cfg'", ("vocabulary_size=10 on rank 0", "vocabulary_size=10 on ranks 0"), "vocabulary_size=11 on rank 1"])
    model, emb2, _ = fit_model()
    for opt, words in ((keras.optimizers.RMSprop(0.1), ["RMSprop", "table 'users'"]),
                       (keras.optimizers.AdamW(0.1), ["AdamW", "table 'users'"]),
                       (keras.optimizers.Adam(0.1, global_clipnorm=1.0),
                        ["global_clipnorm", "table 'users'"])):
        dist = hk.DistributedOptimizer(opt)
        C.raises("%s refused" % type(opt).__name__,
                 lambda: dist.build(model.trainable_variables), ShardingError, words)
    zero = hk.DistributedOptimizer(keras.optimizers.Adam(0.1), sharded=True)
    C.raises("the sharded optimizer refuses sharded tables",
             lambda: zero.build(model.trainable_variables), ShardingError,
             ["sharded=True", "emb/users", "emb/items"])
    own = TableConfig("own", 10, 2, optimizer=keras.optimizers.Nadam())
    bad_own = DistributedEmbedding(FeatureConfig("f", own, (None,), (None, 2)), name="own")
    C.raises("a table's own optimizer refused", lambda: bad_own.build(None), ShardingError,
             ["Nadam", "table 'own'"])


def _state(model, emb):
    values = {}
    for name in emb.table_names():
        values["table:" + name] = emb.get_table(name)
        for s in emb._hvd.tables[name].rule.slot_names:
            values["slot:%s:%s" % (name, s)] = emb.get_slot(name, s)
    for i, w in enumerate(model.get_layer("head").get_weights()):
        values["head:%d" % i] = w
    values["iterations"] = np.asarray(int(model.optimizer.iterations.numpy()))
    return values


def _ckpt_data():
    x, y = lib.fit_data(steps=6, seed=21)
    return {f: lib.rank_rows(v, N, R) for f, v in x.items()}, lib.rank_rows(y, N, R)


def _fit_steps(model, x, y, first, count):
    sl = slice(first * B, (first + count) * B)
    model.fit({f: v[sl] for f, v in x.items()}, y[sl], batch_size=B, epochs=1,
              shuffle=False, verbose=0)


def section_ckpt_save():
    x, y = _ckpt_data()
    model, emb, _ = fit_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.05)), loss="mse")
    _fit_steps(model, x, y, 0, 3)
    hk.save_model(model, os.path.join(DIR, "emb.keras"))
    save_embedding_shards(model, os.path.join(DIR, "shards"))
    state = _state(model, emb)
    _fit_steps(model, x, y, 3, 3)
    after = _state(model, emb)
    if R == 0:
        np.savez(os.path.join(DIR, "emb_state.npz"), **state)
        np.savez(os.path.join(DIR, "emb_after.npz"), **after)
    C.expect(os.path.exists(os.path.join(DIR, "emb.keras")) or R != 0, "file written")
    shards = os.path.join(DIR, "shards")
    C.equal("save_embedding_shards: one complete step", sorted(os.listdir(shards)),
            ["step-00000000"])
    _failed_save(model, shards)
    _check_shards_load("load_embedding_shards at np=2", shards, state, warns=True)
    _bad_shards(shards, emb.table_names(), state)


def _failed_save(model, shards):
    """Rank 1's disk is full: the save fails on every rank naming rank 1, step 0
    stays, and step 1 stays half-written (rank 0's files, no manifest)."""
    def no_space(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", path)
    if R == 1:
        commit.open = no_space   # StepWriter's writes (module global shadows the builtin)
    try:
        C.raises("a save rank 1 cannot write", lambda: save_embedding_shards(model, shards),
                 CheckpointSaveError,
                 ["rank 1 cannot write", os.path.join(shards, "step-00000001.partial-"),
                  "No space left on device"] + (["is not published: rank 1:"] if R == 0 else []))
    finally:
        if R == 1:
            del commit.open
    hk.allgather_object(R)   # every rank's check done before rank 0 lists the directory
    names = sorted(os.listdir(shards))
    C.equal("after the failed save: step 0 and half-written step 1", [
        n.split(".partial-")[0] + (".partial" if ".partial-" in n else "") for n in names],
        ["step-00000000", "step-00000001.partial"])


def _check_shards_load(label, directory, saved, warns=False):
    fresh, emb2, _ = fit_model()
    fresh.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.05)), loss="mse")
    fresh.optimizer.build(fresh.trainable_variables)
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("tf_hvd").addHandler(handler)
    try:
        load_embedding_shards(fresh, directory)
    finally:
        logging.getLogger("tf_hvd").removeHandler(handler)
    if warns:   # rank 0 looks for the newest step and says what it ignores
        C.equal("%s: the half-written step ignored, saying so" % label,
                [m.split(".partial-")[0] for m in seen if "half-written" in m],
                ["tf_hvd checkpoint: ignoring %s" % os.path.join(directory, "step-00000001")]
                if R == 0 else [])
    for name in emb2.table_names():
        C.close("%s %s" % (label, name), [emb2.get_table(name)], [saved["table:" + name]])
        for s in emb2._hvd.tables[name].rule.slot_names:
            C.close("%s %s %s" % (label, name, s), [emb2.get_slot(name, s)],
                    [saved["slot:%s:%s" % (name, s)]])
    return fresh


def _bad_shards(shards, tables, saved):
    """Copies of step 0 made wrong by rank 0: a flipped byte, a table of another size
    in the manifest; and the earlier layout, files and manifest.json in the directory."""
    step = os.path.join(shards, "step-00000000")
    flipped, resized, old = (os.path.join(DIR, n) for n in ("flipped", "resized", "old"))
    victim = os.path.join(flipped, "step-00000000", "emb", "%s.table.1-of-2.npy" % tables[0])
    if R == 0:
        for d in (flipped, resized):
            shutil.copytree(step, os.path.join(d, "step-00000000"))
        with open(victim, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 0x10]))
        path = os.path.join(resized, "step-00000000", "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        manifest["meta"]["layers"]["emb"][tables[1]]["vocabulary_size"] = 99
        with open(path, "w") as f:
            json.dump(manifest, f)
        shutil.copytree(os.path.join(step, "emb"), os.path.join(old, "emb"))
        with open(os.path.join(step, "manifest.json")) as f:
            meta = json.load(f)["meta"]
        with open(os.path.join(old, "manifest.json"), "w") as f:
            json.dump(meta, f)
    hk.allgather_object(R)
    fresh, _, _ = fit_model()
    C.raises("a flipped byte in a shard file", lambda: load_embedding_shards(fresh, flipped),
             CheckpointError, [victim, "is corrupted: its CRC-32 is"])
    C.raises("a table of another size", lambda: load_embedding_shards(fresh, resized),
             ShardingError, ["table '%s' of layer 'emb' is 99 x %d" % (
                                 tables[1], lib.TABLES[tables[1]][1]),
                             "the layer's is %d x %d" % lib.TABLES[tables[1]][:2]])
    _check_shards_load("the earlier layout at np=2", old, saved)


def _check_state(label, got, expected):
    keys = sorted(k for k in expected.files if k != "iterations")
    C.equal("%s keys" % label, sorted(k for k in got if k != "iterations"), keys)
    C.close(label, [got[k] for k in keys], [expected[k] for k in keys])


def section_ckpt_resume():
    x, y = _ckpt_data()
    saved = np.load(os.path.join(DIR, "emb_state.npz"))
    after = np.load(os.path.join(DIR, "emb_after.npz"))
    model = hk.load_model(os.path.join(DIR, "emb.keras"))
    emb = model.get_layer("emb")
    C.expect(hk.is_distributed_optimizer(model.optimizer), "loaded optimizer is distributed")
    # the slots come into being when the optimizer is built (the loaded rows wait)
    model.optimizer.build(model.trainable_variables)
    _check_state("hvd.load_model at np=%d" % N, _state(model, emb), saved)
    _fit_steps(model, x, y, 3, 3)
    _check_state("3 steps after loading at np=%d" % N, _state(model, emb), after)
    _check_shards_load("load_embedding_shards at np=%d" % N, os.path.join(DIR, "shards"),
                       saved, warns=True)


def _initial_features():
    import keras_rs
    inits = [("uniform", 50, 4, "mod", keras.initializers.RandomUniform(seed=7)),
             ("glorot", 31, 3, "range", keras.initializers.GlorotUniform(seed=3)),
             ("truncated", 17, 5, "mod", keras.initializers.TruncatedNormal(seed=11))]
    tables = {name: keras_rs.layers.TableConfig(name, vocabulary_size=v, embedding_dim=d,
                                                initializer=init)
              for name, v, d, _, init in inits}
    features = {name: keras_rs.layers.FeatureConfig(name, t, (2,), (2, t.embedding_dim))
                for name, t in tables.items()}
    return features, {name: mode for name, _, _, mode, _ in inits}


def _gathered_initial(features, sharding):
    emb = DistributedEmbedding(features, table_sharding=sharding)
    emb.build(None)
    return {name: emb.get_table(name) for name in emb.table_names()}   # collectives


def _one_process_initial(features, sharding):
    # the layer as one process builds it (its build runs no collective)
    at_np = ranks.rank_size
    ranks.rank_size = lambda: (0, 1)
    try:
        emb = DistributedEmbedding(features, table_sharding=sharding)
        emb.build(None)
        return {name: emb._hvd.tables[name].shard.numpy() for name in emb.table_names()}
    finally:
        ranks.rank_size = at_np


def section_initial():
    """A table's initial rows depend on the seed and the row id, not on np."""
    import keras_rs
    features, sharding = _initial_features()
    here = _gathered_initial(features, sharding)
    one = _one_process_initial(features, sharding)
    rs = keras_rs.layers.DistributedEmbedding(features)
    rs({name: np.array([0, 1]) for name in features})
    rs_tables = {name: np.asarray(v) for name, v in rs.get_embedding_tables().items()}
    for name in sorted(here):
        C.close("initial rows at np=%d: %s equals one process's" % (N, name),
                [here[name]], [one[name]], rtol=0, atol=0)
        C.close("initial rows at np=%d: %s equals keras-rs'" % (N, name),
                [here[name]], [rs_tables[name]], rtol=0, atol=0)
    blocks = initial_rows.ELEMENTS_PER_BLOCK
    initial_rows.ELEMENTS_PER_BLOCK = 40      # several blocks a table
    try:
        many = _gathered_initial(features, sharding)
        many_one = _one_process_initial(features, sharding)
    finally:
        initial_rows.ELEMENTS_PER_BLOCK = blocks
    for name in sorted(many):
        C.close("initial rows of several blocks at np=%d: %s equals one process's"
                % (N, name), [many[name]], [many_one[name]], rtol=0, atol=0)
    path = os.path.join(DIR, "initial_np2.npz")
    if N == 2 and R == 0:
        np.savez(path, **dict(list(here.items()) +
                              [("blocks:" + k, v) for k, v in many.items()]))
    elif N == 3:
        with np.load(path) as saved:
            for name in sorted(here):
                C.close("initial rows at np=3: %s equals np=2's" % name,
                        [here[name], many[name]],
                        [saved[name], saved["blocks:" + name]], rtol=0, atol=0)


def section_ckpt_plain():
    """Last: tf_hvd shut down, rank 0 is one plain process: Keras' own load_model
    reads DIR/emb.keras with whole tables."""
    hk.shutdown()
    if R != 0:
        return
    model = keras.models.load_model(os.path.join(DIR, "emb.keras"), compile=False)
    saved = np.load(os.path.join(DIR, "emb_state.npz"))
    emb = model.get_layer("emb")
    C.equal("plain load: whole tables", [tuple(w.shape) for w in emb.trainable_weights],
            [(37, 4), (29, 4)])
    for name, weight in zip(emb.table_names(), emb.trainable_weights):
        C.close("plain load: table %s" % name, [weight.numpy()], [saved["table:" + name]],
                rtol=0, atol=0)


C.section("fit", section_fit)
C.section("loop", section_loop)
C.section("bad_input", section_bad_input)
C.section("initial", section_initial)
C.section("ckpt_save", section_ckpt_save)
C.section("ckpt_resume", section_ckpt_resume)
C.section("ckpt_plain", section_ckpt_plain)
sys.exit(C.finish())
