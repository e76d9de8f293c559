#!/bin/sh
echo "tf_hvd: bazel coverage is not supported (no coverage tools offline)" >&2
exit 1
