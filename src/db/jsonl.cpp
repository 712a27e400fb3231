#include "db/jsonl.h"

#include <cmath>
#include <fstream>
#include <istream>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>

#include "runtime/text_file.h"
#include "te/error.h"

namespace tessera {

using nlohmann::json;

std::string record_to_json(const Record& rec) {
  const MeasureResult& r = rec.result;
  json j;
  j["workload"] = r.workload;
  j["strategy"] = r.strategy;
  j["dtype"] = r.dtype;
  j["flops"] = r.flops;
  j["target"] = {{"cpu_model", rec.target.cpu_model},
                 {"isa", rec.target.isa},
                 {"cores", rec.target.cores},
                 {"compiler", rec.target.compiler},
                 {"flags", rec.target.flags}};
  if (!rec.target.timing.empty()) j["target"]["timing"] = rec.target.timing;
  j["error"] = error_kind_name(r.error);
  j["message"] = r.message;
  j["repeats"] = r.timing.repeats;
  j["number"] = r.timing.number;
  j["mean"] = r.timing.mean;
  j["median"] = r.timing.median;
  j["std"] = r.timing.std;
  j["build_seconds"] = r.build_seconds;
  j["run_seconds"] = r.run_seconds;
  j["timestamp_ms"] = r.timestamp_ms;
  j["tessera_version"] = rec.tessera_version;
  j["schema_version"] = rec.schema_version;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Record record_from_json(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at ...".
    std::string what = e.what();
    size_t pos = what.find("] ");
    throw_error("not JSON: {}", pos == std::string::npos ? what : what.substr(pos + 2));
  }
  if (!j.is_object()) throw_error("not a JSON object");
  std::string field;
  try {
    Record rec;
    MeasureResult& r = rec.result;
    auto get = [&](const json& obj, const char* name) -> const json& {
      field = name;
      return obj.at(name);
    };
    // nlohmann converts a float to an integer type unchecked: 1e25 as an int64 is undefined
    // (found by fuzz/record_fuzzer.cpp). Whole numbers in range only.
    auto get_whole = [&]<typename T>(const json& obj, const char* name, T) -> T {
      const json& v = get(obj, name);
      if (!v.is_number()) throw_error("field '{}' has the wrong type", name);
      if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t{std::numeric_limits<T>::max()})
        return static_cast<T>(v.get<uint64_t>());
      if (v.is_number_integer() && !v.is_number_unsigned() &&
          v.get<int64_t>() >= std::numeric_limits<T>::min() &&
          v.get<int64_t>() <= std::numeric_limits<T>::max())
        return static_cast<T>(v.get<int64_t>());
      throw_error("field '{}' is not a whole number in range", name);
    };
    r.workload = get(j, "workload").get<std::string>();
    r.strategy = get(j, "strategy").get<std::string>();
    r.dtype = get(j, "dtype").get<std::string>();
    r.flops = get(j, "flops").get<double>();
    const json& t = get(j, "target");
    rec.target.cpu_model = get(t, "cpu_model").get<std::string>();
    rec.target.isa = get(t, "isa").get<std::vector<std::string>>();
    rec.target.cores = get_whole(t, "cores", int{});
    rec.target.compiler = get(t, "compiler").get<std::string>();
    rec.target.flags = get(t, "flags").get<std::string>();
    rec.target.timing = t.value("timing", std::string());
    const std::string kind = get(j, "error").get<std::string>();
    auto parsed = parse_error_kind(kind);
    if (!parsed) throw_error("unknown error kind '{}'", kind);
    r.error = *parsed;
    r.message = get(j, "message").get<std::string>();
    r.timing.repeats = get(j, "repeats").get<std::vector<double>>();
    r.timing.number = get_whole(j, "number", int64_t{});
    r.timing.mean = get(j, "mean").get<double>();
    r.timing.median = get(j, "median").get<double>();
    r.timing.std = get(j, "std").get<double>();
    r.build_seconds = get(j, "build_seconds").get<double>();
    r.run_seconds = get(j, "run_seconds").get<double>();
    r.timestamp_ms = get_whole(j, "timestamp_ms", int64_t{});
    rec.tessera_version = get(j, "tessera_version").get<std::string>();
    rec.schema_version = get_whole(j, "schema_version", int{});
    if (r.workload.empty()) throw_error("empty workload");
    // A successful measurement is a positive time: 0 or less would read as infinite GFLOP/s.
    if (r.error == ErrorKind::kOk && !(r.timing.median > 0 && std::isfinite(r.timing.median)))
      throw_error("median {} is not a positive time", r.timing.median);
    if (!(r.flops >= 0 && std::isfinite(r.flops))) throw_error("flops {} is not a count", r.flops);
    return rec;
  } catch (const json::out_of_range&) {
    throw_error("missing field '{}'", field);
  } catch (const json::type_error&) {
    throw_error("field '{}' has the wrong type", field);
  }
}

size_t export_jsonl(RecordDb& db, std::ostream& out) {
  size_t n = 0;
  for (const Record& r : db.records()) {
    out << record_to_json(r) << '\n';
    ++n;
  }
  out.flush();
  if (!out) throw_error("cannot write the exported records");
  return n;
}

std::vector<Record> parse_jsonl(std::istream& in, const std::string& name) {
  std::vector<Record> records;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      records.push_back(record_from_json(line));
    } catch (const Error& e) {
      throw_error("{}:{}: {}; nothing was imported", name, number, e.what());
    }
  }
  if (in.bad()) throw_error("cannot read {}", name);
  return records;
}

ImportStats import_jsonl(RecordDb& db, const std::string& path) {
  require_regular_file(path, "records file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read {}", path);
  std::vector<Record> records = parse_jsonl(in, path);
  ImportStats st;
  st.records = records.size();
  st.added = db.append(records);
  st.duplicates = st.records - st.added;
  return st;
}

}  // namespace tessera
