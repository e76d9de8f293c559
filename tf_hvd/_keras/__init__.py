"""Keras support shared by the core API and tf_hvd.keras (as Horovod's ``horovod._keras``).

``tf_hvd.DistributedOptimizer(keras_optimizer)`` and
``tf_hvd.keras.DistributedOptimizer`` both build their wrappers here, so that the
core modules never import the public tf_hvd.keras package above them::

    from tf_hvd._keras.optimizer import create_distributed_optimizer
    opt = create_distributed_optimizer(keras.optimizers.Adam(), params)
"""
