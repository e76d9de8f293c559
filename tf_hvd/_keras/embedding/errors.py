"""ShardingError, from where tf_hvd keeps it (tf_hvd.exceptions; the sharded
optimizer's module before that)::

    from tf_hvd._keras.embedding.errors import ShardingError
"""

try:
    from tf_hvd.exceptions import ShardingError  # noqa: F401
except ImportError:  # pragma: no cover - until the move to tf_hvd.exceptions lands
    from tf_hvd._keras.sharded_optimizer import ShardingError  # noqa: F401
