"""Every rank must describe the same tables and features to a DistributedEmbedding:
the check (a collective) and the message naming what differs where.

    check_same_tables("embedding", tables, features, size)   # ShardingError if not
    tables_mismatch("embedding", everyone)   # the message, or None
"""

import collections

from tf_hvd.exceptions import ShardingError
from tf_hvd.functions import allgather_object
from tf_hvd.job.rank_names import rank_list


def signature(table):
    """What must match across ranks of ``table``, in the order of _FIELDS."""
    opt = table.optimizer
    opt_name = None if opt is None else (opt if isinstance(opt, str) else type(opt).__name__)
    return (int(table.vocabulary_size), int(table.embedding_dim), table.combiner,
            table.sharding, str(opt_name))


def check_same_tables(layer_name, tables, features, size):
    """Every rank must describe the same tables: ShardingError naming the table,
    the field and the ranks otherwise (a collective when ``size > 1``)."""
    mine = {"tables": [(name, signature(t)) for name, t in tables.items()],
            "features": [(f.name, t) for f, t in features]}
    if size == 1:
        return
    everyone = allgather_object(mine, name="DistributedEmbedding.%s.tables" % layer_name)
    message = tables_mismatch(layer_name, everyone)
    if message:
        raise ShardingError(message)


_FIELDS = ("vocabulary_size", "embedding_dim", "combiner", "sharding", "optimizer")


def tables_mismatch(layer_name, everyone):
    """The message for tables that differ across ranks (``everyone[r]`` is rank
    r's description), or None."""
    names = collections.OrderedDict()
    for r, desc in enumerate(everyone):
        names.setdefault(tuple(n for n, _ in desc["tables"]), []).append(r)
    if len(names) > 1:
        return ("DistributedEmbedding '%s': the tables differ across ranks: %s"
                % (layer_name, "; ".join("%s on %s" % (list(n), rank_list(rs))
                                         for n, rs in names.items())))
    for i, (name, _) in enumerate(everyone[0]["tables"]):
        for f, field in enumerate(_FIELDS):
            seen = collections.OrderedDict()
            for r, desc in enumerate(everyone):
                seen.setdefault(desc["tables"][i][1][f], []).append(r)
            if len(seen) > 1:
                return ("DistributedEmbedding '%s': table '%s' differs across ranks: %s"
                        % (layer_name, name, " but ".join(
                            "%s=%r on %s" % (field, v, rank_list(rs)) for v, rs in seen.items())))
    features = collections.OrderedDict()
    for r, desc in enumerate(everyone):
        features.setdefault(tuple(tuple(x) for x in desc["features"]), []).append(r)
    if len(features) > 1:
        return ("DistributedEmbedding '%s': the features differ across ranks: %s"
                % (layer_name, "; ".join("%s on %s" % (list(f), rank_list(rs))
                                         for f, rs in features.items())))
    return None
