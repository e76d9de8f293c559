#include "cc/common/algorithms/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace tfhvd {

namespace {
std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }
}  // namespace

char* CreateRegion(size_t bytes, std::string* name, std::string* error) {
  std::random_device rd;
  *name = "/tfhvd." + std::to_string(getpid()) + "." + std::to_string(rd()) +
          std::to_string(rd());
  int fd = shm_open(name->c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    *error = Errno("shm_open(" + *name + ")");
    name->clear();
    return nullptr;
  }
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    errno = rc;
    *error = Errno("reserving " + std::to_string(bytes) + " bytes in /dev/shm");
    close(fd);
    shm_unlink(name->c_str());
    name->clear();
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = Errno("mmap of " + *name);
    shm_unlink(name->c_str());
    name->clear();
    return nullptr;
  }
  return static_cast<char*>(p);
}

char* OpenRegion(const std::string& name, size_t bytes, std::string* error) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    *error = Errno("shm_open(" + name + ")");
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    *error = name + " is smaller than expected";
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = Errno("mmap of " + name);
    return nullptr;
  }
  return static_cast<char*>(p);
}

}  // namespace tfhvd
