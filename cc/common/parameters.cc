#include "cc/common/parameters.h"

#include <cstdlib>
#include <sstream>

#include "cc/common/knobs.h"

namespace tfhvd {

Status Parameters::FromLookup(const std::function<const char*(const char*)>& lookup,
                              Parameters* p) {
  *p = Parameters();
  for (const KnobSpec& spec : Knobs()) {
    const char* v = lookup(spec.name);
    if (v == nullptr || *v == '\0') continue;  // unset or empty: the default
    Status s = ParseKnob(spec, v, p);
    if (!s.ok()) return s;
    p->set_knobs.insert(spec.name);
  }
  if (p->peer_timeout_s > 0 &&
      p->peer_timeout_s < kMinPeerTimeoutProofs * kLivenessProofPeriodS) {
    std::ostringstream text;
    text << "HOROVOD_PEER_TIMEOUT_SECONDS='" << p->peer_timeout_s << "' is below " << kMinPeerTimeoutProofs * kLivenessProofPeriodS
         << " s: each rank's core proves it is alive every " << kLivenessProofPeriodS
         << " s, so a bound shorter than " << kMinPeerTimeoutProofs
         << " proof periods would declare healthy ranks lost between two proofs; use at least "
         << kMinPeerTimeoutProofs * kLivenessProofPeriodS << ", or 0 to turn the check off";
    return Status::InvalidArgument(text.str());
  }
  // Defaults that follow other knobs.
  p->stall_check = !p->stall_check_disable;
  if (p->local_rank < 0) p->local_rank = p->rank;
  if (p->local_size < 0) p->local_size = p->size;
  return Status();
}

Status Parameters::FromEnvironment(Parameters* p) {
  return FromLookup([](const char* name) { return std::getenv(name); }, p);
}

}  // namespace tfhvd
