// Named POSIX shared-memory regions for the shared-memory collectives: one
// rank creates its region under a name only the job learns, the others map
// it by that name.
//
//   std::string name, error;
//   char* mine = CreateRegion(bytes, &name, &error);   // this rank's
//   char* theirs = OpenRegion(peer_name, bytes, &error);  // a peer's
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_REGION_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_REGION_H_

#include <cstddef>
#include <string>

namespace tfhvd {

// Creates and maps a region only this job knows the name of (*name; empty
// and nullptr returned on failure, with *error saying why). Space is
// reserved up front: a tmpfs that runs out later would kill the process with
// SIGBUS in the middle of a copy.
char* CreateRegion(size_t bytes, std::string* name, std::string* error);
// Maps a peer's region of at least `bytes` bytes.
char* OpenRegion(const std::string& name, size_t bytes, std::string* error);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_REGION_H_
