"""How tf_hvd.run ships a function to its ranks and their results back.

cloudpickle (functions defined anywhere, closures, lambdas) when installed, else pickle
(``fn`` must then be importable by name on the ranks); either output loads with pickle.

    >>> serializer().__name__ in ("cloudpickle", "pickle")
    True
"""

import pickle

try:  # optional third-party dependency (pinned in tools/requirements.txt)
    import cloudpickle as _cloudpickle
except ImportError:
    _cloudpickle = None


def serializer():
    """The module whose ``dump`` writes payloads and results (cloudpickle or pickle)."""
    return _cloudpickle if _cloudpickle is not None else pickle
