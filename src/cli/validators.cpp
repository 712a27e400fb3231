#include "cli/validators.h"

#include <sched.h>

#include <cerrno>
#include <cstdlib>

#include "db/record_db.h"

namespace tessera {

namespace {

constexpr int kMaxThreads = 1024;

CLI::Validator at_least(double minimum, bool inclusive, std::string description, std::string what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "'" + text + "' is not a number";
        bool ok = inclusive ? value >= minimum : value > minimum;
        return ok ? std::string() : "must be " + what + ", not " + text;
      },
      std::move(description));
}

}  // namespace

CLI::Validator positive_number() {
  return at_least(0, false, "POSITIVE", "positive");
}

CLI::Validator non_negative_number() {
  return at_least(0, true, "NONNEGATIVE", "zero or more");
}

CLI::Validator thread_count() {
  // An upper bound too: libgomp crashed creating 99,999 threads.
  CLI::Validator at_most(
      [](std::string& text) -> std::string {
        return std::strtod(text.c_str(), nullptr) > kMaxThreads
                   ? "must be at most " + std::to_string(kMaxThreads) + ", not " + text
                   : std::string();
      },
      "");
  return at_least(0, true, "THREADS", "0 (all cores) or more") & at_most;
}

CLI::Validator whole_number(uint64_t max, std::string what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE || value > max)
          return "must be " + what + ", not '" + text + "'";
        return "";
      },
      "UINT");
}

CLI::Validator seed_number() {
  return whole_number(UINT64_MAX, "a whole number from 0 to 2^64-1");
}

CLI::Validator cpu_id() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        long id = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || id < 0) return "'" + text + "' is not a CPU number";
        cpu_set_t allowed;
        CPU_ZERO(&allowed);
        if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return "";
        if (id < CPU_SETSIZE && CPU_ISSET(static_cast<int>(id), &allowed)) return "";
        std::string list;
        for (int c = 0; c < CPU_SETSIZE; ++c)
          if (CPU_ISSET(c, &allowed)) list += (list.empty() ? "" : " ") + std::to_string(c);
        return "CPU " + text + " is not one this process may run on (" + list + ")";
      },
      "CPU");
}

CLI::Validator nonempty_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "the path is empty" : ""; },
      "FILE");
}

CLI::Validator db_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (names_no_db_file(text))
          return "'" + text + "' names no file: every record would be lost";
        return "";
      },
      "FILE");
}

void add_layout_option(CLI::App* app, std::string& layout) {
  app->add_option("--layout", layout,
                  "nchwc (default): convolutions and what lies between them in channel blocks of "
                  "the ISA's lanes, converted at the edges; nchw: the model's layout throughout")
      ->check(CLI::IsMember({"nchwc", "nchw"}));
}

void add_conv_algorithm_option(CLI::App* app, std::string& algorithm) {
  app->add_option("--conv-algorithm", algorithm,
                  "auto (default): Winograd F(4x4, 3x3) for the blocked 3x3 stride-1 convolutions "
                  "with at least 16 output tiles and 64 input channels (AVX2) or 32 (AVX-512); "
                  "direct: the direct kernel everywhere")
      ->check(CLI::IsMember({"auto", "direct"}));
}

}  // namespace tessera
