//===- FuzzFile.h - A fuzz input as a file the runtime can open -*- C++ -*-===//
//
// The artifact loader and the safetensors reader take paths (they read with
// positioned reads, never the whole file). One anonymous in-memory file
// (memfd) per process, rewritten for each input and opened through
// /proc/self/fd, gives them a real regular file without touching the disk.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_FUZZ_FUZZFILE_H
#define LOOMRT_FUZZ_FUZZFILE_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace loomrt::fuzz {

class FuzzFile {
public:
  FuzzFile() {
    fd_ = ::memfd_create("loomrt-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }

  /// Replaces the file's contents with `data`.
  void assign(const void *data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 ||
        (size != 0 && ::pwrite(fd_, data, size, 0) != ssize_t(size))) {
      std::perror("memfd write");
      std::abort();
    }
  }

  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

} // namespace loomrt::fuzz

#endif // LOOMRT_FUZZ_FUZZFILE_H
