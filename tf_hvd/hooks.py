"""BroadcastGlobalVariablesHook for tf.compat.v1.train.MonitoredTrainingSession."""

import tensorflow as tf

from tf_hvd import functions


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcast all global variables from ``root_rank`` once the session exists.

    Use it when training starts from random weights or from a checkpoint that
    only ``root_rank`` restored, so every rank starts from the same state::

        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as sess:
            ...

    (tf.estimator is gone from TensorFlow 2.21; the hook is a
    ``tf.compat.v1.train.SessionRunHook``.)
    """

    def __init__(self, root_rank, device=''):
        super(BroadcastGlobalVariablesHook, self).__init__()
        self.root_rank = root_rank
        self.device = device
        self.bcast_op = None

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        if self.bcast_op is None or self.bcast_op.graph is not graph:
            with tf.device(self.device):
                self.bcast_op = functions.broadcast_global_variables(
                    self.root_rank)

    def after_create_session(self, session, coord):
        if self.bcast_op is not None:
            session.run(self.bcast_op)
