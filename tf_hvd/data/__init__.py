"""tf.data service run by a tf_hvd job (Horovod's horovod.tensorflow.data).

Nothing is imported here on purpose: like Horovod, users import the submodules,

    from tf_hvd.data.compute_service import TfDataServiceConfig, tf_data_service
    python -m tf_hvd.data.compute_worker /tmp/compute.json --dispatchers 1

so ``import tf_hvd`` never starts or loads the data service machinery.
"""
