"""The reduce operations (``hvd.Average``, ``hvd.Sum``, ...).

The integers are the values the ops' ``reduce_op`` attribute takes::

    hvd.allreduce(x, op=hvd.Sum)
"""

Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

REDUCE_OP_NAMES = {
    Average: "Average",
    Sum: "Sum",
    Adasum: "Adasum",
    Min: "Min",
    Max: "Max",
    Product: "Product",
}
