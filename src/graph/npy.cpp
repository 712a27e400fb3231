#include "graph/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/output_file.h"
#include "runtime/text_file.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The value text after `'key':` in the header dict, up to the next top-level comma or brace.
std::string header_value(const std::string& header, const std::string& key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw_error("the header has no '{}'", key);
  at = header.find(':', at);
  if (at == std::string::npos) throw_error("the header's '{}' has no value", key);
  size_t end = at + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string v = header.substr(at + 1, end - at - 1);
  size_t b = v.find_first_not_of(" "), e = v.find_last_not_of(" ");
  return b == std::string::npos ? "" : v.substr(b, e - b + 1);
}

}  // namespace

HostTensor parse_npy(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) throw_error("not a .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw_error("truncated header");
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    throw_error("format version {} is not supported", major);
  }
  if (bytes.size() < offset + header_len) throw_error("truncated header");
  std::string header(bytes.substr(offset, header_len));
  std::string descr = header_value(header, "descr");
  if (header_value(header, "fortran_order") != "False")
    throw_error("Fortran-order arrays are not supported");
  size_t elem = 0;
  bool is_int = false;
  if (descr == "'<f4'" || descr == "'<i4'")
    elem = 4, is_int = descr == "'<i4'";
  else if (descr == "'<f8'" || descr == "'<i8'")
    elem = 8, is_int = descr == "'<i8'";
  else
    throw_error("element type {} is not supported (float32, float64, int32 and int64 are)", descr);
  std::string shape_text_v = header_value(header, "shape");
  HostTensor t;
  // A Python tuple of whole numbers: "(2, 3)", "(4,)", "()".
  if (shape_text_v.size() < 2 || shape_text_v.front() != '(' || shape_text_v.back() != ')')
    throw_error("shape {} is not a tuple", shape_text_v);
  std::string inner = shape_text_v.substr(1, shape_text_v.size() - 2);
  std::vector<std::string> items{""};
  for (char c : inner) {
    if (c == ',')
      items.emplace_back();
    else if (c != ' ')
      items.back() += c;
  }
  if (items.size() > 1 && items.back().empty()) items.pop_back();  // "(4,)"
  if (items.size() == 1 && items[0].empty()) items.clear();        // "()"
  for (const std::string& digits : items) {
    // Checked here: stoll throws past int64, and a product of large dimensions wraps.
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      throw_error("shape {} holds '{}', not a dimension", shape_text_v, digits);
    if (digits.size() > 12) throw_error("dimension {} is too large", digits);
    t.shape.push_back(std::stoll(digits));
  }
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t elements = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && elements > kMaxElements / d)
      throw_error("shape {} is too large (more than 2^40 elements)", shape_text(t.shape));
    elements *= d;
  }
  size_t count = static_cast<size_t>(elements);
  size_t data_at = offset + header_len;
  if (bytes.size() - data_at != count * elem)
    throw_error("holds {} data bytes, shape {} needs {}", bytes.size() - data_at,
                shape_text(t.shape), count * elem);
  t.data.resize(count);
  t.is_int = is_int;
  const char* at = bytes.data() + data_at;
  for (size_t i = 0; i < count; ++i) {
    if (elem == 4 && is_int) {
      int32_t v;
      std::memcpy(&v, at + 4 * i, 4);
      t.data[i] = v;
    } else if (elem == 4) {
      float v;
      std::memcpy(&v, at + 4 * i, 4);
      t.data[i] = v;
    } else if (is_int) {
      int64_t v;
      std::memcpy(&v, at + 8 * i, 8);
      t.data[i] = static_cast<double>(v);  // ids: exact below 2^53
    } else {
      std::memcpy(&t.data[i], at + 8 * i, 8);
    }
  }
  return t;
}

HostTensor read_npy(const std::string& path) {
  require_regular_file(path, ".npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return parse_npy(ss.str());
  } catch (const Error& e) {
    throw_error("{}: {}", path, e.what());
  }
}

void write_npy(const std::string& path, const HostTensor& t) {
  // Python tuple syntax: "(2, 3)", but "(4,)" for one dimension.
  std::string shape;
  for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.size() == 1) shape += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic, version and length take 10 bytes; the header pads with spaces to a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(kMagic, 6);
    out.put(1);
    out.put(0);
    out.put(static_cast<char>(header.size() & 0xff));
    out.put(static_cast<char>(header.size() >> 8));
    out << header;
    for (double d : t.data) {
      auto v = static_cast<float>(d);
      out.write(reinterpret_cast<const char*>(&v), 4);
    }
  });
}

}  // namespace tessera::graph
