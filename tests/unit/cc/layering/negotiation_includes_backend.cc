// Must NOT build (//tests/unit/cc/layering:negotiation_includes_backend): negotiation code
// that includes a backend's header.
#include "cc/common/gloo/tcp_mesh.h"
#include "cc/common/negotiation/controller.h"
