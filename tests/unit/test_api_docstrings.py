"""The Example: blocks of the flagship APIs and of every tf_hvd.keras class run
as written (doctest, one process: size 1 after hvd.init()).

Each example may use ``hvd`` (tf_hvd, or tf_hvd.keras for tf_hvd.keras names),
``tf``, ``np`` and ``keras``, as Keras' own docstring examples assume their
imports.
"""

import doctest
import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_hvd
import tf_hvd.keras

CORE = ["allreduce", "allgather", "broadcast", "broadcast_variables",
        "DistributedOptimizer", "DistributedGradientTape", "Compression", "Checkpointer"]
KERAS = ["DistributedOptimizer", "PartialDistributedOptimizer", "SyncBatchNormalization",
         "callbacks.BroadcastGlobalVariablesCallback", "callbacks.MetricAverageCallback",
         "callbacks.LearningRateScheduleCallback", "callbacks.LearningRateWarmupCallback",
         "callbacks.BestModelCheckpoint", "callbacks.BackupAndRestore", "elastic.KerasState",
         "elastic.CommitStateCallback", "elastic.UpdateBatchStateCallback",
         "elastic.UpdateEpochStateCallback", "layers.DistributedEmbedding"]


def _lookup(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _keras_classes(module):
    return sorted("%s.%s" % (module.__name__.rsplit(".", 1)[1], name)
                  for name, obj in vars(module).items()
                  if inspect.isclass(obj) and not name.startswith("_")
                  and obj.__module__ == module.__name__)


def test_every_public_keras_class_is_listed():
    listed = set(KERAS)
    for module in (tf_hvd.keras.callbacks, tf_hvd.keras.elastic):
        missing = [c for c in _keras_classes(module) if c not in listed]
        assert not missing, "give these an Example: and list them here: %s" % missing


def _run_examples(label, obj, hvd):
    docstring = inspect.getdoc(obj) or ""
    assert "Example:" in docstring, "%s has no Example: block" % label
    test = doctest.DocTestParser().get_doctest(
        docstring, {"hvd": hvd, "tf": tf, "np": np, "keras": keras}, label, None, 0)
    assert test.examples, "%s: its Example: block has no >>> lines" % label
    failures = []
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)


@pytest.fixture(scope="module", autouse=True)
def _init():
    tf_hvd.init()


@pytest.mark.parametrize("name", CORE)
def test_core_examples_run(name):
    _run_examples("tf_hvd." + name, getattr(tf_hvd, name), tf_hvd)


@pytest.mark.parametrize("name", KERAS)
def test_keras_examples_run(name):
    _run_examples("tf_hvd.keras." + name, _lookup(tf_hvd.keras, name), tf_hvd.keras)
