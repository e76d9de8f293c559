// The values the autotuner (parameter_manager.h) tunes; the coordinator sends
// new ones in a round's ResponseList (negotiation/message.h) and every rank
// applies them at the end of that round.
//
//   TunedParameters t;
//   t.fusion_threshold_bytes = 64 << 20;
#ifndef TFHVD_COMMON_AUTOTUNE_TUNED_PARAMETERS_H_
#define TFHVD_COMMON_AUTOTUNE_TUNED_PARAMETERS_H_

#include <cstdint>

namespace tfhvd {

struct TunedParameters {
  int64_t fusion_threshold_bytes = 0;
  double cycle_time_ms = 0;
  bool response_cache = true;
  bool hierarchical_allreduce = false;
  bool operator==(const TunedParameters& o) const {
    return fusion_threshold_bytes == o.fusion_threshold_bytes &&
           cycle_time_ms == o.cycle_time_ms && response_cache == o.response_cache &&
           hierarchical_allreduce == o.hierarchical_allreduce;
  }
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_AUTOTUNE_TUNED_PARAMETERS_H_
