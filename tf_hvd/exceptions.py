"""The exceptions of elastic training, named as in horovod.common.exceptions.

    from tf_hvd.exceptions import HorovodInternalError
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
