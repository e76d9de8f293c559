"""Spark ML Params for the estimator and its model, with Horovod's setters and getters
(``setEpochs(5)``, ``getEpochs()``) made from one table::

    class Fit(Params):
        def __init__(self):
            super().__init__()
            defaults(self)
    declare(Fit, {"epochs": ("how many epochs", 1)})
    Fit().setEpochs(5).getEpochs()   # 5
"""

from pyspark.ml.param import Param, Params


def _camel(name):
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def declare(cls, table):
    """Give ``cls`` a Param, a setter and a getter for each (name: (doc, default))."""
    for name, (doc, _) in table.items():
        setattr(cls, name, Param(Params._dummy(), name, doc))
        camel = _camel(name)

        def setter(self, value, _name=name):
            return self._set(**{_name: value})

        def getter(self, _name=name):
            return self.getOrDefault(getattr(self, _name))
        setter.__doc__ = "Sets %s: %s" % (name, doc)
        getter.__doc__ = "%s (%s)" % (doc[:1].upper() + doc[1:], name)
        setattr(cls, "set" + camel, setter)
        setattr(cls, "get" + camel, getter)
    cls._param_table = dict(getattr(cls, "_param_table", {}), **table)
    return cls


def defaults(instance):
    """Set every declared Param's default on ``instance``."""
    instance._setDefault(**{name: default for name, (_, default) in
                            type(instance)._param_table.items()})


def values(instance):
    """{name: value} of every declared Param (set or default)."""
    return {name: instance.getOrDefault(getattr(instance, name))
            for name in type(instance)._param_table}
