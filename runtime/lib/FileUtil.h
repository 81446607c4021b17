//===- FileUtil.h - Positioned reads and atomic writes ---------*- C++ -*-===//
//
// Small POSIX wrappers that turn every I/O failure into a loomrt::Error that
// names the file and the errno text, so no caller can forget a check.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_FILEUTIL_H
#define LOOMRT_LIB_FILEUTIL_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace loomrt {

/// A read-only file descriptor.
class File {
public:
  static File openRead(const std::string &path);
  File(File &&other) noexcept;
  File &operator=(File &&other) noexcept;
  File(const File &) = delete;
  File &operator=(const File &) = delete;
  ~File();

  uint64_t size() const;
  /// Reads exactly `n` bytes at `offset`; a short file is an error.
  void readAt(uint64_t offset, void *buffer, uint64_t n) const;
  const std::string &path() const { return path_; }

private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

/// Writes to `path.tmp.<pid>` and renames it over `path` on commit(), so a
/// crash or error never leaves a half-written file under the real name.
class AtomicFileWriter {
public:
  explicit AtomicFileWriter(std::string path);
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;
  ~AtomicFileWriter();

  void write(const void *data, uint64_t n);
  void commit();

private:
  std::string path_;
  std::string tmpPath_;
  int fd_ = -1;
};

/// Makes the renames inside `dir` durable (a rename is only on disk once
/// its directory is synced).
void syncDirectory(const std::string &dir);

/// The whole file as a string.
std::string readFile(const std::string &path);

} // namespace loomrt

#endif // LOOMRT_LIB_FILEUTIL_H
