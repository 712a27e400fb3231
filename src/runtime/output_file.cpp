#include "runtime/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "te/error.h"

namespace tessera {

namespace fs = std::filesystem;

FileKind file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileKind::kMissing;
  if (!S_ISREG(st.st_mode)) return FileKind::kNotRegular;
  if (st.st_size == 0) return FileKind::kEmpty;
  std::ifstream in(path, std::ios::binary);
  char head[16] = {};
  in.read(head, sizeof head);
  const auto n = static_cast<size_t>(in.gcount());
  auto starts = [&](const char* magic, size_t len) {
    return n >= len && std::memcmp(head, magic, len) == 0;
  };
  if (starts("SQLite format 3", 16)) return FileKind::kRecordsDb;
  if (starts("\x7f"
             "ELF",
             4))
    return FileKind::kSharedLibrary;
  if (starts("\x93NUMPY", 6)) return FileKind::kNpy;
  if (starts("{\"format\":\"tesse", 16)) return FileKind::kCostModel;
  if (starts("tessera-treegru ", 16)) return FileKind::kCostModel;  // model/treegru_model.h
  if (head[0] == '{') return FileKind::kJsonl;
  return FileKind::kOther;
}

const char* file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::kMissing:
      return "nothing";
    case FileKind::kEmpty:
      return "an empty file";
    case FileKind::kNotRegular:
      return "not a regular file";
    case FileKind::kRecordsDb:
      return "a records database";
    case FileKind::kSharedLibrary:
      return "a shared library";
    case FileKind::kNpy:
      return "a .npy array";
    case FileKind::kJsonl:
      return "JSON lines";
    case FileKind::kCostModel:
      return "a tessera cost model";
    case FileKind::kOther:
      return "a file of another kind";
  }
  return "?";
}

namespace {

// A new empty file `.NAME.XXXXXX` in the folder of `path`, where it can be renamed over it.
std::string make_temp_beside(const std::string& path) {
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string temp = (folder / ("." + target.filename().string() + ".XXXXXX")).string();
  int fd = ::mkstemp(temp.data());
  if (fd < 0) throw_error("cannot write {}: {}", path, std::strerror(errno));
  ::close(fd);
  return temp;
}

}  // namespace

void check_output_path(const std::string& output, FileKind writes,
                       const std::vector<std::string>& inputs) {
  if (output.empty()) throw_error("the output path is empty");
  std::error_code ec;
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    if (fs::equivalent(output, input, ec) ||
        fs::weakly_canonical(output, ec) == fs::weakly_canonical(input, ec)) {
      throw_error("{}: refusing to write the output over an input of this command", output);
    }
  }
  const FileKind there = file_kind(output);
  if (there == FileKind::kNotRegular)
    throw_error("{}: not a regular file (a device, a folder, ...): refusing to replace it", output);
  if (there != FileKind::kMissing && there != FileKind::kEmpty && there != writes)
    throw_error("{} holds {}, not {}: refusing to overwrite it", output, file_kind_name(there),
                file_kind_name(writes));
  // The output is written beside its target and renamed over it: a folder that takes no new file
  // (read-only, /proc, a name past the file system's limit) is refused now, not after the work.
  ::unlink(make_temp_beside(output).c_str());
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  const std::string tmp = make_temp_beside(path);
  auto fail = [&](const std::string& why) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw_error("cannot write {}: {}", path, why);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::strerror(errno));
    try {
      write(out);
    } catch (...) {
      out.close();
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw;
    }
    out.flush();
    if (!out) fail(errno ? std::strerror(errno) : "write error");
  }
  // The stream's close does not report ENOSPC that the page cache deferred: fsync does.
  int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    fail(std::strerror(err));
  }
  ::close(fd);
  // mkstemp creates 0600; an output gets the permissions any new file of the user's would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(tmp.c_str(), 0666 & ~mask);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail(ec.message());
}

}  // namespace tessera
