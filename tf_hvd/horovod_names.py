"""Horovod's import names (``horovod.tensorflow``, ``horovod.tensorflow.keras``, ...) for
code that cannot change its imports: the opt-in ``tf-hvd-horovod`` distribution.

Libraries built on Horovod (embedding libraries, model zoos) and large code bases import
``horovod.tensorflow`` and its submodules in many files. ``pip install
"tf_hvd[horovod]"`` installs the small ``tf-hvd-horovod`` distribution, whose one
``.pth`` line calls :func:`install` at interpreter start-up, and a ``horovodrun``
command that is ``tfhvdrun`` (tf_hvd.runner.horovodrun). After that::

    import horovod.tensorflow.keras as hvd      # is tf_hvd.keras
    from horovod.tensorflow.mpi_ops import Sum  # is tf_hvd.mpi_ops.Sum
    from horovod.common.exceptions import HorovodInternalError

Each Horovod module *is* the tf_hvd module (``horovod.tensorflow is tf_hvd``), not a
copy, so state and ``isinstance`` checks are shared. A Horovod module with no tf_hvd
counterpart (``horovod.torch``, ``horovod.mxnet``, private helpers) raises
``ModuleNotFoundError`` saying so.

A real Horovod always wins: pip cannot refuse to install a wheel beside another (a wheel
runs no code at install time), so the names stand aside at run time instead. When a
``horovod`` package is on ``sys.path``, :func:`install` leaves ``import horovod`` to it,
and ``horovodrun`` (which pip then wrote over Horovod's) refuses to start, naming both.
Nothing here imports TensorFlow: the ``.pth`` line costs one finder object.
"""

import importlib
import importlib.abc
import importlib.util
import sys

from tf_hvd.job.real_horovod import real_horovod

# Horovod's public modules and the tf_hvd module each one is.
ALIASES = {
    "horovod.tensorflow": "tf_hvd",
    "horovod.tensorflow.mpi_ops": "tf_hvd.mpi_ops",
    "horovod.tensorflow.compression": "tf_hvd.compression",
    "horovod.tensorflow.functions": "tf_hvd.functions",
    "horovod.tensorflow.elastic": "tf_hvd.elastic",
    "horovod.tensorflow.gradient_aggregation": "tf_hvd.gradient_aggregation",
    "horovod.tensorflow.gradient_aggregation_eager": "tf_hvd.gradient_aggregation",
    "horovod.tensorflow.sync_batch_norm": "tf_hvd.sync_batch_norm",
    "horovod.tensorflow.keras": "tf_hvd.keras",
    "horovod.tensorflow.keras.callbacks": "tf_hvd.keras.callbacks",
    "horovod.tensorflow.keras.elastic": "tf_hvd.keras.elastic",
    "horovod.keras": "tf_hvd.keras",
    "horovod.keras.callbacks": "tf_hvd.keras.callbacks",
    "horovod.keras.elastic": "tf_hvd.keras.elastic",
    "horovod.common.exceptions": "tf_hvd.exceptions",
    "horovod.common.process_sets": "tf_hvd.process_sets",
    "horovod.common.elastic": "tf_hvd.elastic",
    "horovod.runner": "tf_hvd.runner",
    "horovod.ray": "tf_hvd.ray",
    "horovod.spark": "tf_hvd.spark",
    "horovod.spark.keras": "tf_hvd.spark.keras",
    "horovod.spark.common.store": "tf_hvd.spark.store",
}

# Packages that only hold the aliased modules (``horovod`` itself also carries ``run``
# and the Horovod release whose API tf_hvd follows).
NAMESPACES = ("horovod", "horovod.common", "horovod.spark.common")
HOROVOD_API_VERSION = "0.28.1"

_OTHER_FRAMEWORKS = ("torch", "mxnet")


def _missing(fullname):
    top = fullname.split(".")[1] if "." in fullname else fullname
    if top in _OTHER_FRAMEWORKS:
        why = "tf_hvd is for TensorFlow only; %s has no tf_hvd counterpart" % fullname
    else:
        why = ("%s is not one of Horovod's public modules that tf_hvd provides (%s)"
               % (fullname, ", ".join(sorted(ALIASES))))
    return ModuleNotFoundError("No module named %r: %s." % (fullname, why), name=fullname)


class HorovodNamesFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers every ``horovod`` and ``horovod.*`` import while no real Horovod is on
    ``sys.path``. It sits first on ``sys.meta_path``: an aliased package keeps tf_hvd's
    ``__path__``, and the path finder would otherwise load ``tf_hvd/keras`` a second
    time under the name ``horovod.tensorflow.keras``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "horovod" and not fullname.startswith("horovod."):
            return None
        if real_horovod() is not None:
            return None
        if fullname not in ALIASES and fullname not in NAMESPACES:
            raise _missing(fullname)
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def __init__(self):
        self._target_specs = {}

    def create_module(self, spec):
        target = ALIASES.get(spec.name)
        if target is None:
            return None  # a namespace: the import system makes an empty module
        module = importlib.import_module(target)
        # The import system sets __spec__ of what this returns to the alias's spec;
        # exec_module puts tf_hvd's back, so the module still knows its own name.
        self._target_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        if module.__name__ not in NAMESPACES:  # an aliased tf_hvd module, already run
            own = self._target_specs.pop(module.__spec__.name, None)
            if own is not None:
                module.__spec__ = own
            return
        module.__path__ = []  # submodules come only from this finder
        if module.__name__ == "horovod":
            module.__version__ = HOROVOD_API_VERSION
            module.__getattr__ = _horovod_getattr


def _horovod_getattr(name):
    # horovod.run is the launcher's run API; resolved on use, as tf_hvd does.
    if name == "run":
        return importlib.import_module("tf_hvd.runner").run
    raise AttributeError("module 'horovod' has no attribute %r" % (name,))


def install():
    """Puts the finder first on ``sys.meta_path`` (once). The ``.pth`` line of the
    ``tf-hvd-horovod`` distribution calls this at start-up.

    Example::

        import tf_hvd.horovod_names
        tf_hvd.horovod_names.install()
        import horovod.tensorflow as hvd   # tf_hvd
    """
    if not any(isinstance(f, HorovodNamesFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, HorovodNamesFinder())
