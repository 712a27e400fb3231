#include "measure/worker_protocol.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "te/error.h"

namespace tessera {

using nlohmann::json;

std::string encode_request(const RunRequest& r) {
  json j{{"workload", r.workload},
         {"library", r.library},
         {"entry", r.entry},
         {"check", r.check},
         {"seed", r.seed}};
  j["timing"] = {
      {"warmup", r.timing.warmup},           {"number", r.timing.number},
      {"repeat", r.timing.repeat},           {"min_repeat_ms", r.timing.min_repeat_ms},
      {"flush_cache", r.timing.flush_cache}, {"keep_first_cached", r.timing.keep_first_cached}};
  return j.dump();
}

RunRequest decode_request(const std::string& line) {
  try {
    json j = json::parse(line);
    RunRequest r;
    r.workload = j.at("workload").get<std::string>();
    r.library = j.at("library").get<std::string>();
    r.entry = j.at("entry").get<std::string>();
    r.check = j.at("check").get<bool>();
    r.seed = j.at("seed").get<uint64_t>();
    const json& t = j.at("timing");
    r.timing.warmup = t.at("warmup").get<int>();
    r.timing.number = t.at("number").get<int>();
    r.timing.repeat = t.at("repeat").get<int>();
    r.timing.min_repeat_ms = t.at("min_repeat_ms").get<double>();
    r.timing.flush_cache = t.at("flush_cache").get<bool>();
    r.timing.keep_first_cached = t.value("keep_first_cached", false);
    return r;
  } catch (const json::exception& e) {
    throw_error("malformed run request: {}", e.what());
  }
}

std::string encode_prepared() {
  return json{{"event", "prepared"}}.dump();
}

std::string encode_result(const RunResult& r) {
  json j{{"event", "done"},           {"error", error_kind_name(r.error)},
         {"message", r.message},      {"repeats", r.timing.repeats},
         {"number", r.timing.number}, {"max_abs_error", r.max_abs_error}};
  // The message may hold any bytes a failing kernel left behind; never fail to encode it.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void decode_reply(const std::string& line, bool& prepared, RunResult& result) {
  try {
    json j = json::parse(line);
    const std::string event = j.at("event").get<std::string>();
    prepared = event == "prepared";
    if (prepared) return;
    if (event != "done") throw_error("unknown event '{}'", event);
    auto kind = parse_error_kind(j.at("error").get<std::string>());
    if (!kind) throw_error("unknown error kind '{}'", j.at("error").get<std::string>());
    result.error = *kind;
    result.message = j.at("message").get<std::string>();
    result.timing = summarize_repeats(j.at("repeats").get<std::vector<double>>(),
                                      j.at("number").get<int64_t>());
    const json& err = j.at("max_abs_error");  // null for NaN or infinity
    result.max_abs_error = err.is_number() ? err.get<double>() : HUGE_VAL;
  } catch (const json::exception& e) {
    throw_error("malformed reply from the worker: {}", e.what());
  }
}

}  // namespace tessera
