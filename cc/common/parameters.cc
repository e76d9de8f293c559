#include "cc/common/parameters.h"

#include <cstdlib>
#include <string>

namespace tfhvd {

namespace {
bool Read(const char* name, double* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v) return false;
  *out = d;
  return true;
}
}  // namespace

Parameters Parameters::FromEnvironment() {
  Parameters p;
  double d;
  if (Read("HOROVOD_FUSION_THRESHOLD", &d) && d >= 0) p.fusion_threshold_bytes = static_cast<int64_t>(d);
  if (Read("HOROVOD_CYCLE_TIME", &d) && d >= 0) p.cycle_time_ms = d;
  if (Read("HOROVOD_CACHE_CAPACITY", &d) && d >= 0) p.cache_capacity = static_cast<int64_t>(d);
  if (Read("HOROVOD_STALL_CHECK_DISABLE", &d) && d != 0) p.stall_check = false;
  if (Read("HOROVOD_STALL_CHECK_TIME_SECONDS", &d) && d > 0) p.stall_warning_s = d;
  if (Read("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", &d) && d >= 0) p.stall_shutdown_s = d;
  return p;
}

}  // namespace tfhvd
