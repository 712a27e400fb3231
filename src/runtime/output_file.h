/// Writing a command's output without destroying anything: the target is checked against the
/// command's inputs and against what already lies there, then written to a temporary file in the
/// same folder and renamed into place, so a failed or interrupted write leaves the old file whole.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tessera {

/// What a file holds, told by its first bytes.
enum class FileKind {
  kMissing,
  kEmpty,
  kNotRegular,
  kRecordsDb,
  kSharedLibrary,
  kNpy,
  kJsonl,
  kCostModel,  // `tessera pretrain`'s JSON: {"format":"tessera-cost-model", ...
  kOther
};

FileKind file_kind(const std::string& path);
const char* file_kind_name(FileKind kind);

/// Throws tessera::Error when writing `output` (a file of kind `writes`) would overwrite one of
/// `inputs` (the same file under any name), a device, a folder or another non-regular file, or an
/// existing file of another kind (a records DB where a model goes). Empty inputs are ignored.
void check_output_path(const std::string& output, FileKind writes,
                       const std::vector<std::string>& inputs);

/// Calls `write` on a temporary file next to `path` and renames it over `path` once every byte
/// reached the disk; throws tessera::Error naming the reason (a full disk, a read-only folder)
/// and removes the temporary file when anything fails.
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

}  // namespace tessera
