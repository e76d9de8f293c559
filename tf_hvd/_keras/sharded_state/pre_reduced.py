"""Whether gradients were already averaged by a DistributedGradientTape: the one rule
for every optimizer that must not average them a second time (the sharded optimizer's
reduce-scatter, and a DistributedOptimizer updating sharded table rows).

The tape marks each gradient it averaged (tf_hvd.tape.REDUCED_MARK). The rule: all
marked, they were averaged (True); none marked, they were not (False); a mixture is a
ShardingError, because either answer is wrong for some of them: averaging again would
count the tape's gradients ``n`` times under ``op=hvd.Sum``, not averaging would leave
the others each rank's own. Gradients of sharded table rows are not asked (no tape
reduces them: the layer's backward pass sends them to their rows' ranks)::

    pre_reduced(grads, "sharded optimizer")     # True, False, or ShardingError
"""

from tf_hvd.exceptions import ShardingError
from tf_hvd.tape import REDUCED_MARK

_ADVICE = {
    "sharded optimizer": "pass the gradients of a plain tf.GradientTape (the optimizer "
                         "averages them with one reduce-scatter)",
}
_DEFAULT_ADVICE = ("pass the gradients of a plain tf.GradientTape (the optimizer "
                   "averages them) or all of them from the DistributedGradientTape")


def pre_reduced(grads, who="DistributedOptimizer"):
    """True if every gradient (None aside) came averaged from a DistributedGradientTape,
    False if none did; ShardingError naming ``who`` for a mixture."""
    marks = [bool(getattr(g, REDUCED_MARK, False)) for g in grads if g is not None]
    if marks and all(marks):
        return True
    if any(marks):
        raise ShardingError(
            "%s: some gradients were averaged by a DistributedGradientTape and some "
            "were not; %s" % (who, _ADVICE.get(who, _DEFAULT_ADVICE)))
    return False
