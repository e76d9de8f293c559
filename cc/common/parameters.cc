#include "cc/common/parameters.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace tfhvd {

namespace {

// Reads a non-negative number from the environment. Unset or empty leaves
// *out alone; anything else that is not a non-negative number is an error
// naming the variable.
Status Read(const char* name, double* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return Status();
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v, &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (end == v || *end != '\0' || errno == ERANGE || !(d >= 0)) {
    return Status::InvalidArgument(std::string(name) + "='" + v +
                                   "' is not a valid value: expected a non-negative number");
  }
  *out = d;
  return Status();
}

}  // namespace

Status Parameters::FromEnvironment(Parameters* p) {
  *p = Parameters();
  double fusion = static_cast<double>(p->fusion_threshold_bytes);
  double cache = static_cast<double>(p->cache_capacity);
  double disable = 0;
  double malloc_reuse = 1;
  double shm = 1;
  double spin_wait = static_cast<double>(p->spin_us);
  double shm_min = static_cast<double>(p->shm_min_bytes);
  double shm_slot = static_cast<double>(p->shm_slot_bytes);
  double gather_max = static_cast<double>(p->gather_max_bytes);
  for (auto&& [name, target] : {std::pair<const char*, double*>{"HOROVOD_FUSION_THRESHOLD", &fusion},
                                {"HOROVOD_CYCLE_TIME", &p->cycle_time_ms},
                                {"HOROVOD_CACHE_CAPACITY", &cache},
                                {"HOROVOD_STALL_CHECK_DISABLE", &disable},
                                {"HOROVOD_STALL_CHECK_TIME_SECONDS", &p->stall_warning_s},
                                {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", &p->stall_shutdown_s},
                                {"HOROVOD_MALLOC_REUSE", &malloc_reuse},
                                {"HOROVOD_SPIN_US", &spin_wait},
                                {"HOROVOD_SHM_ALLREDUCE", &shm},
                                {"HOROVOD_SHM_MIN_BYTES", &shm_min},
                                {"HOROVOD_SHM_SLOT_BYTES", &shm_slot},
                                {"HOROVOD_GLOO_DIRECT_MAX_BYTES", &gather_max}}) {
    Status s = Read(name, target);
    if (!s.ok()) return s;
  }
  p->fusion_threshold_bytes = static_cast<int64_t>(fusion);
  p->cache_capacity = static_cast<int64_t>(cache);
  p->stall_check = disable == 0;
  p->malloc_reuse = malloc_reuse != 0;
  p->spin_us = static_cast<int64_t>(spin_wait);
  p->shm_allreduce = shm != 0;
  p->shm_min_bytes = static_cast<int64_t>(shm_min);
  if (shm_slot < 4096 || shm_slot > double(int64_t{1} << 32)) {
    return Status::InvalidArgument(
        "HOROVOD_SHM_SLOT_BYTES='" + std::string(std::getenv("HOROVOD_SHM_SLOT_BYTES")) +
        "' is not a valid value: expected a number of bytes from 4096 to 4294967296");
  }
  p->shm_slot_bytes = static_cast<int64_t>(shm_slot);
  p->gather_max_bytes = static_cast<int64_t>(gather_max);
  if (const char* links = std::getenv("HOROVOD_GLOO_LINKS")) {
    if (*links) p->gloo_links = links;
    if (p->gloo_links != "pairs" && p->gloo_links != "pairs_busy_poll" &&
        p->gloo_links != "mesh") {
      return Status::InvalidArgument(std::string("HOROVOD_GLOO_LINKS='") + links +
                                     "' is not a valid value: expected pairs, "
                                     "pairs_busy_poll or mesh");
    }
  }
  return Status();
}

}  // namespace tfhvd
