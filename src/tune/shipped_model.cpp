#include "tune/shipped_model.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

#include "runtime/isa.h"

namespace tessera {

std::optional<std::string> shipped_cost_model(const std::string& isa) {
  std::vector<std::filesystem::path> dirs;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&shipped_cost_model), &info) && info.dli_fname) {
    std::filesystem::path self = std::filesystem::path(info.dli_fname).parent_path();
    dirs.push_back(self / "cost-models");
    dirs.push_back(self / ".." / "share" / "tessera" / "cost-models");
  }
#ifdef TESSERA_COST_MODELS_DIR
  dirs.emplace_back(TESSERA_COST_MODELS_DIR);
#endif
  for (const std::filesystem::path& dir : dirs) {
    std::error_code ec;
    std::filesystem::path file = dir / (isa + ".json");
    if (std::filesystem::is_regular_file(file, ec)) return file.lexically_normal().string();
  }
  return std::nullopt;
}

std::optional<std::string> default_pretrained(const TuneParams& params, RecordDb* db,
                                              const std::string& target_key) {
  if (!params.pretrained.empty() || params.transfer == "off" || params.tuner != "xgb" ||
      params.features != "relation")
    return std::nullopt;
  // Records of this machine, of any workload, mean the DB's own global model can be fitted:
  // it knows this machine better than a model trained on another.
  if (db) {
    RecordQuery q;
    q.target_key = target_key;
    q.limit = 1;
    if (!db->records(q).empty()) return std::nullopt;
  }
  return shipped_cost_model(target_isa().name);
}

}  // namespace tessera
