"""Whether a real Horovod is installed beside tf_hvd's Horovod names: the import names
(tf_hvd.horovod_names) step aside for it, and the launcher's ``horovodrun`` refuses to
run over it. TensorFlow-free, so both can ask::

    >>> real_horovod() is None or isinstance(real_horovod(), str)
    True
"""

import importlib.machinery


def real_horovod():
    """The location of a ``horovod`` package on ``sys.path`` other than tf_hvd's names,
    or None (asked of the path finder alone, so the names' finder never answers)."""
    spec = importlib.machinery.PathFinder.find_spec("horovod")
    if spec is None:
        return None
    return spec.origin or ", ".join(spec.submodule_search_locations or ()) or "horovod"
