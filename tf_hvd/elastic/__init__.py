"""Elastic training with Horovod's API: when a rank is lost, the others roll back to
their last commit, form a smaller job among themselves and go on.

    import tf_hvd as hvd

    hvd.init()
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                step(...)
                state.commit()
            state.batch = 0

    train(state)

Run it with ``tfhvdrun -np 4 --min-np 2 python train.py``: a rank that fails no longer
ends the job while at least --min-np ranks are left. The survivors' next collective fails
(HorovodInternalError); ``run`` restores the state from the last ``commit()``, shuts the
core down, agrees with the other survivors (through the launcher's rendezvous store) on
who is left, initialises again as a job of that size (ranks renumbered in the old order),
broadcasts the state from the new rank 0 and calls the function again.

With --host-discovery-script the launcher starts ranks on the slots the script adds
(localhost for now, up to --max-np); ``commit()`` (through ``check_host_updates()``) then
raises HostsUpdatedInterrupt on every rank, and ``run`` re-forms the job with them. A host
where a rank failed gets no new rank for the rest of the job, or until its
--blacklist-cooldown-range cooldown ends. Keras: tf_hvd.keras.elastic.

The package, by job: the State classes (state.py; Keras models: keras_state.py), the
run loop (run_loop.py), moving this process into the job's next form (rounds.py: shut
down, re-form, initialise again; reform.py: agreeing on the round's members) and the
line to the launcher's store (store.py). This module gives their public names.
"""

from tf_hvd.elastic.keras_state import TensorFlowKerasState
from tf_hvd.elastic.reform import JOINING_GRACE_SECONDS, LISTED_WAIT_SECONDS, SETTLE_SECONDS
from tf_hvd.elastic.rounds import join_before_init
from tf_hvd.elastic.run_loop import run
from tf_hvd.elastic.state import ObjectState, State, TensorFlowState
from tf_hvd.elastic.store import HOST_ENV, ID_ENV, JOIN_ENV, ROUND_ENV
from tf_hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState",
           "HorovodInternalError", "HostsUpdatedInterrupt"]
