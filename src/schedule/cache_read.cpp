#include <fmt/format.h>

#include "schedule/rules.h"
#include "schedule/stage_tools.h"

namespace tessera {

ProgramStrategy cache_read(const std::string& buffer, const std::string& loop_ref) {
  std::string text = fmt::format("cache_read({}, {})", buffer, loop_ref);
  return ProgramStrategy(
      text, [=](const Program& p) { return cache_box(p, text, buffer, loop_ref, false); });
}

}  // namespace tessera
