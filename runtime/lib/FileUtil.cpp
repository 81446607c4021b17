//===- FileUtil.cpp - Positioned reads and atomic writes ------------------===//

#include "FileUtil.h"

#include "loomrt/Error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loomrt {
namespace {

[[noreturn]] void ioError(const std::string &path, const std::string &what) {
  throw Error(path + ": " + what + ": " + std::strerror(errno));
}

} // namespace

File File::openRead(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    ioError(path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ioError(path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  return File(fd, path);
}

File::File(File &&other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

File &File::operator=(File &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0)
    ::close(fd_);
}

uint64_t File::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0)
    ioError(path_, "cannot stat");
  return uint64_t(st.st_size);
}

void File::readAt(uint64_t offset, void *buffer, uint64_t n) const {
  char *out = static_cast<char *>(buffer);
  while (n > 0) {
    ssize_t got = ::pread(fd_, out, n, off_t(offset));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      ioError(path_, "read failed at byte " + std::to_string(offset));
    }
    if (got == 0)
      throw Error(path_ + ": unexpected end of file at byte " +
                  std::to_string(offset) + " (" + std::to_string(n) +
                  " more bytes expected)");
    out += got;
    offset += uint64_t(got);
    n -= uint64_t(got);
  }
}

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)),
      tmpPath_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ =
      ::open(tmpPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    ioError(tmpPath_, "cannot create");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmpPath_.c_str());
  }
}

void AtomicFileWriter::write(const void *data, uint64_t n) {
  const char *in = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t put = ::write(fd_, in, n);
    if (put < 0) {
      if (errno == EINTR)
        continue;
      ioError(tmpPath_, "write failed");
    }
    in += put;
    n -= uint64_t(put);
  }
}

void AtomicFileWriter::commit() {
  // The data reaches the disk before the name does: after a crash the real
  // name holds the old file or the whole new one, never a torn one.
  if (::fsync(fd_) != 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmpPath_.c_str());
    ioError(tmpPath_, "fsync failed");
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(tmpPath_.c_str());
    ioError(tmpPath_, "close failed");
  }
  fd_ = -1;
  if (::rename(tmpPath_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmpPath_.c_str());
    ioError(path_, "cannot rename " + tmpPath_ + " to it");
  }
}

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    ioError(dir, "cannot open the directory");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    ioError(dir, "fsync of the directory failed");
}

std::string readFile(const std::string &path) {
  File f = File::openRead(path);
  std::string text(f.size(), '\0');
  f.readAt(0, text.data(), text.size());
  return text;
}

} // namespace loomrt
