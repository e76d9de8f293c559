// Must NOT build (//tests/unit/cc/layering:core_includes_pybind11): core code that
// includes pybind11.
#include "cc/common/core/background_loop.h"
#include <pybind11/pybind11.h>
