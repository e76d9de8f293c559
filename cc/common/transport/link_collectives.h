// Small collectives built from links (cc/common/transport/links.h) that the algorithms
// and the negotiation share: length-prefixed strings, an allgather of equal
// blocks, a gather/broadcast of strings, a bitwise OR and a barrier.
//
//   std::vector<std::string> names;
//   Status s = AllgatherStrings(links, my_name, &names);  // names[r]: rank r's
#ifndef TFHVD_COMMON_TRANSPORT_LINK_COLLECTIVES_H_
#define TFHVD_COMMON_TRANSPORT_LINK_COLLECTIVES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/common/transport/links.h"

namespace tfhvd {

// A length-prefixed message of any size.
Status SendString(Links& links, int to, const std::string& bytes);
Status RecvString(Links& links, int from, std::string* bytes);

// out holds size() blocks of `bytes`; block r receives rank r's `mine` (this
// rank's block is copied unless mine already points at it). Step k sends to
// rank+k and receives from rank-k, so every pair of ranks meets once.
Status AllgatherBlocks(Links& links, const void* mine, void* out, size_t bytes);

// Every rank's string on every rank, in rank order.
Status AllgatherStrings(Links& links, const std::string& mine, std::vector<std::string>* all);

// Every rank's string on rank 0 (*all is filled there only).
Status GatherStrings(Links& links, const std::string& mine, std::vector<std::string>* all);

// root's string on every rank.
Status BroadcastString(Links& links, std::string* data, int root);

// Bitwise OR of n words across ranks, in place. scratch is reused across calls.
Status BitwiseOrWords(Links& links, uint64_t* words, size_t n, std::vector<char>* scratch);

// Returns once every rank has called it.
Status LinksBarrier(Links& links);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_LINK_COLLECTIVES_H_
