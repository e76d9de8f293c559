"""The DataFrame's columns an estimator trains on: checked on the driver and made
Parquet-ready (Spark ML vectors become arrays of doubles), before anything is written.

    numeric_columns(df, ["features"], ["label"])   # ValueError/TypeError naming a column
"""

NUMERIC = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType",
           "BooleanType", "DecimalType")


def _kind(data_type):
    """'scalar', 'array' or 'vector' for a numeric column type, else None."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import ArrayType
    name = type(data_type).__name__
    if name in NUMERIC:
        return "scalar"
    if isinstance(data_type, VectorUDT):
        return "vector"
    if isinstance(data_type, ArrayType) and type(data_type.elementType).__name__ in NUMERIC:
        return "array"
    return None


def is_vector(data_type):
    """Whether a column holds Spark ML vectors."""
    return _kind(data_type) == "vector"


def check(df, roles):
    """``roles``: {role: [column, ...]} (features, labels, sample weights). Raises
    ValueError for columns the DataFrame lacks, TypeError for non-numeric ones."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = ["%s %r" % (role, c) for role, cols in roles.items() for c in cols
               if c not in fields]
    if missing:
        raise ValueError("the DataFrame has no column for %s; its columns are %s"
                         % (", ".join(missing), sorted(fields)))
    bad = ["%s %r is %s" % (role, c, fields[c].simpleString())
           for role, cols in roles.items() for c in cols if _kind(fields[c]) is None]
    if bad:
        raise TypeError("%s: features, labels and sample weights must be numbers, arrays of "
                        "numbers or Spark ML vectors" % "; ".join(bad))


def for_parquet(df, columns):
    """``df`` with only ``columns``, ML vectors turned into arrays of doubles."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F
    fields = {f.name: f.dataType for f in df.schema.fields}
    picked = []
    for c in dict.fromkeys(columns):
        kind = _kind(fields[c])
        if kind == "vector":
            picked.append(vector_to_array(F.col(c)).alias(c))
        elif type(fields[c]).__name__ in ("BooleanType", "DecimalType"):
            picked.append(F.col(c).cast("double").alias(c))
        else:
            picked.append(F.col(c))
    return df.select(*picked)
