#include "cc/common/runtime_library.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

namespace tfhvd {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::vector<std::string> RuntimeLibraryCandidates(const std::vector<std::string>& sonames,
                                                  const std::vector<std::string>& dirs) {
  std::vector<std::string> candidates;
  for (const std::string& so : sonames) {
    for (const std::string& dir : dirs) {
      if (IsFile(dir + "/" + so)) candidates.push_back(dir + "/" + so);
    }
  }
  candidates.insert(candidates.end(), sonames.begin(), sonames.end());
  return candidates;
}

void* OpenRuntimeLibrary(const std::vector<std::string>& candidates, int flags,
                         const LibraryCheck& accept, std::string* tried) {
  for (const std::string& candidate : candidates) {
    dlerror();
    void* handle = dlopen(candidate.c_str(), flags);
    if (handle == nullptr) {
      const char* e = dlerror();
      *tried += "\n  " + candidate + ": " + (e != nullptr ? e : "dlopen failed");
      continue;
    }
    std::string why;
    if (accept && !accept(handle, &why)) {
      *tried += "\n  " + candidate + ": " + why;
      dlclose(handle);
      continue;
    }
    return handle;
  }
  return nullptr;
}

const char* FirstMissingSymbol(void* handle, const std::vector<const char*>& names) {
  for (const char* name : names) {
    if (dlsym(handle, name) == nullptr) return name;
  }
  return nullptr;
}

std::string LibraryPath(void* handle) {
  struct link_map* map = nullptr;
  if (handle != nullptr && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr &&
      map->l_name != nullptr && map->l_name[0] != '\0') {
    return map->l_name;
  }
  return "?";
}

std::string LibraryFileOf(const void* address) {
  Dl_info info;
  if (address != nullptr && dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "?";
}

}  // namespace tfhvd
