"""The exceptions of elastic training, named as in horovod.common.exceptions, and of
sharded state (the sharded optimizer's, the sharded embedding tables')::

    from tf_hvd.exceptions import HorovodInternalError, ShardingError
"""


class HorovodInternalError(RuntimeError):
    """A collective failed because the job lost a rank (or its core stopped): elastic
    training rolls back to the last commit and continues with the ranks that are left."""


class HostsUpdatedInterrupt(RuntimeError):
    """Hosts were added or removed; raised at a commit so the job can re-form.

    ``skip_sync``: True when only hosts were removed (the state needs no broadcast)."""

    def __init__(self, skip_sync=False):
        RuntimeError.__init__(self, "the job's hosts changed")
        self.skip_sync = skip_sync


class ShardingError(ValueError):
    """The sharded optimizer cannot run as asked (an unsupported optimizer or
    option, variables that differ across ranks, an incompatible checkpoint)."""


class CheckpointError(ValueError):
    """A checkpoint cannot be loaded as it is: a file's size or checksum differs from the
    step's manifest, a variable is missing or extra, or its layout cannot be read at this
    number of ranks. The message names the file and what differs."""


class CheckpointSaveError(OSError):
    """A checkpoint step could not be saved (a full disk, no permission, a rank's part
    missing): the step is not published and the previous complete step stays."""
