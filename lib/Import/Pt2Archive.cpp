//===- Pt2Archive.cpp - Read entries of a .pt2 zip archive ----------------===//

#include "Pt2Archive.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <zip.h>

using namespace loom;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::string zipMessage(zip_error_t *error) {
  std::string message = zip_error_strerror(error);
  zip_error_fini(error);
  return message;
}

llvm::Expected<std::unique_ptr<Pt2Archive>>
Pt2Archive::openFile(llvm::StringRef path) {
  int code = 0;
  std::string p = path.str();
  // ZIP_CHECKCONS rejects archives whose central directory and local headers
  // disagree, which is how most truncations and splices show up.
  zip_t *archive = zip_open(p.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (!archive) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    std::string message = zipMessage(&error);
    // A file that starts with a zip local header but has no readable
    // central directory was cut short or damaged, not of the wrong kind.
    auto head = llvm::MemoryBuffer::getFileSlice(path, 4, 0);
    if (head && (*head)->getBuffer() == llvm::StringRef("PK\x03\x04", 4))
      message += " (the file starts like a zip archive: it is truncated or "
                 "damaged)";
    return makeError("cannot open '" + path + "' as a zip archive: " +
                     message);
  }
  std::unique_ptr<Pt2Archive> result(new Pt2Archive());
  result->archive = archive;
  if (llvm::Error err = result->loadNames())
    return std::move(err);
  return result;
}

llvm::Expected<std::unique_ptr<Pt2Archive>>
Pt2Archive::openBuffer(llvm::StringRef bytes) {
  std::unique_ptr<Pt2Archive> result(new Pt2Archive());
  result->bufferCopy = bytes.str();
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t *source =
      zip_source_buffer_create(result->bufferCopy.data(),
                               result->bufferCopy.size(), 0, &error);
  if (!source)
    return makeError("cannot read the archive: " + zipMessage(&error));
  zip_t *archive =
      zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (!archive) {
    zip_source_free(source);
    return makeError("not a zip archive: " + zipMessage(&error));
  }
  zip_error_fini(&error);
  result->archive = archive;
  if (llvm::Error err = result->loadNames())
    return std::move(err);
  return result;
}

std::unique_ptr<Pt2Archive> Pt2Archive::fromEntries(
    std::vector<std::pair<std::string, std::string>> entries) {
  std::unique_ptr<Pt2Archive> result(new Pt2Archive());
  for (auto &[name, data] : entries) {
    result->names.push_back(std::move(name));
    result->contents.push_back(std::move(data));
  }
  return result;
}

Pt2Archive::~Pt2Archive() {
  if (archive)
    zip_discard(archive);
}

llvm::Error Pt2Archive::loadNames() {
  zip_int64_t count = zip_get_num_entries(archive, 0);
  if (count < 0)
    return makeError("cannot list the archive's entries");
  for (zip_int64_t i = 0; i < count; ++i) {
    const char *name = zip_get_name(archive, i, 0);
    if (!name)
      return makeError(llvm::formatv("entry #{0} of the archive has no name",
                                     i));
    names.emplace_back(name);
  }
  return llvm::Error::success();
}

bool Pt2Archive::contains(llvm::StringRef name) const {
  return llvm::is_contained(names, name);
}

llvm::Expected<std::string> Pt2Archive::read(llvm::StringRef name) const {
  if (!archive) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name)
        return contents[i];
    return makeError("archive entry '" + name + "' is missing");
  }
  std::string n = name.str();
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat(archive, n.c_str(), 0, &stat) != 0 ||
      !(stat.valid & ZIP_STAT_SIZE))
    return makeError("archive entry '" + name + "' is missing");
  // Refuse absurd sizes before allocating: a corrupt header must not make
  // the importer allocate terabytes.
  constexpr zip_uint64_t kMaxEntry = zip_uint64_t(1) << 36;
  if (stat.size > kMaxEntry)
    return makeError(llvm::formatv(
        "archive entry '{0}' claims {1} bytes, more than Loom accepts", name,
        stat.size));
  zip_file_t *file = zip_fopen(archive, n.c_str(), 0);
  if (!file)
    return makeError("cannot open archive entry '" + name +
                     "': " + zip_strerror(archive));
  std::string bytes(stat.size, '\0');
  zip_int64_t got = bytes.empty() ? 0 : zip_fread(file, bytes.data(),
                                                  bytes.size());
  std::string error = got < 0 ? zip_file_strerror(file) : "";
  // Reading to the end makes libzip check the CRC of the entry.
  char extra;
  if (got >= 0 && static_cast<zip_uint64_t>(got) == stat.size &&
      zip_fread(file, &extra, 1) < 0)
    error = zip_file_strerror(file);
  zip_fclose(file);
  if (!error.empty())
    return makeError("archive entry '" + name + "' is corrupt: " + error);
  if (static_cast<zip_uint64_t>(got) != stat.size)
    return makeError(llvm::formatv(
        "archive entry '{0}' is truncated: read {1} of {2} bytes", name, got,
        stat.size));
  return bytes;
}
