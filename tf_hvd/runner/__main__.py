"""``python -m tf_hvd.runner -np 2 python train.py`` == ``tfhvdrun -np 2 python train.py``."""

from tf_hvd.runner.launch import console_main

console_main()
