#include "schedule/strategy_parser.h"

#include <cctype>
#include <map>

#include "schedule/library.h"
#include "te/error.h"

namespace tessera {

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  ProgramStrategy parse() {
    skip_space();
    if (pos_ == text_.size()) return id<Program>();
    ProgramStrategy s = parse_seq();
    skip_space();
    if (pos_ != text_.size()) fail(pos_, fmt::format("unexpected '{}'", text_[pos_]));
    return s;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) {
    throw Error(fmt::format("strategy: column {}: {}", at + 1, what));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool accept(std::string_view tok) {
    skip_space();
    if (text_.substr(pos_, tok.size()) == tok) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }

  void expect(std::string_view tok) {
    if (!accept(tok)) {
      skip_space();
      fail(pos_, pos_ < text_.size() ? fmt::format("expected '{}' but found '{}'", tok, text_[pos_])
                                     : fmt::format("expected '{}' at the end", tok));
    }
  }

  std::string name() {
    skip_space();
    size_t start = pos_;
    auto is_name_char = [&](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    };
    if (pos_ < text_.size() &&
        (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    }
    if (start == pos_)
      fail(pos_, pos_ < text_.size() ? fmt::format("expected a name but found '{}'", text_[pos_])
                                     : "expected a name at the end");
    return std::string(text_.substr(start, pos_ - start));
  }

  // A loop name or an @-location such as @innermost, @innermost(conv), @loop(conv, 2).
  std::string loop_ref() {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != '@') return name();
    size_t at = pos_++;
    std::string kind = name();
    std::string ref = "@" + kind;
    if (kind == "loop") {
      // @loop(n) or @loop(stage, n)
      expect("(");
      skip_space();
      if (pos_ < text_.size() && !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        ref += "(" + name();
        expect(",");
        ref += ", " + std::to_string(integer()) + ")";
      } else {
        ref += "(" + std::to_string(integer()) + ")";
      }
      expect(")");
      return ref;
    }
    if (kind != "innermost" && kind != "outermost") {
      fail(at, "unknown location '@" + kind + "' (known: @innermost, @outermost, @loop(n))");
    }
    if (accept("(")) {
      ref += "(" + name() + ")";
      expect(")");
    }
    return ref;
  }

  int64_t integer() {
    skip_space();
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string digits(text_.substr(start, pos_ - start));
    if (digits.empty() || digits == "-") fail(start, "expected an integer");
    try {
      return std::stoll(digits);
    } catch (const std::out_of_range&) {
      fail(start, "integer out of range");
    }
  }

  ProgramStrategy parse_seq() {
    std::vector<ProgramStrategy> steps{parse_choice()};
    while (accept(";")) steps.push_back(parse_choice());
    return seq_all(std::move(steps));
  }

  ProgramStrategy parse_choice() {
    ProgramStrategy s = parse_atom();
    while (accept("<+")) s = lchoice(s, parse_atom());
    return s;
  }

  std::vector<std::string> loop_list(size_t at, size_t min_count, size_t max_count,
                                     const std::string& rule) {
    std::vector<std::string> loops{loop_ref()};
    while (accept(",")) loops.push_back(loop_ref());
    expect(")");
    if (loops.size() < min_count || loops.size() > max_count) {
      fail(at, fmt::format("{} takes {} loop names, got {}", rule,
                           min_count == max_count ? std::to_string(min_count)
                                                  : "at least " + std::to_string(min_count),
                           loops.size()));
    }
    return loops;
  }

  // Nesting is bounded: the parser recurses once per level, and 50,000 levels overflowed the
  // stack.
  static constexpr int kMaxDepth = 256;

  ProgramStrategy parse_atom() {
    skip_space();
    size_t at = pos_;
    if (++depth_ > kMaxDepth) fail(at, fmt::format("nested more than {} levels deep", kMaxDepth));
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    if (accept("(")) {
      ProgramStrategy s = parse_seq();
      expect(")");
      return s;
    }
    std::string head = name();
    if (head == "id") return id<Program>();
    if (head == "fail") return fail_strategy();
    expect("(");
    if (head == "try" || head == "repeat") {
      ProgramStrategy inner = parse_seq();
      expect(")");
      return head == "try" ? try_(inner) : repeat(inner);
    }
    if (head == "split") {
      std::string loop = loop_ref();
      expect(",");
      int64_t factor = integer();
      expect(")");
      return split(loop, factor);
    }
    if (head == "reorder") return reorder(loop_list(at, 1, 64, head));
    if (head == "compute_at" || head == "reverse_compute_at" || head == "rfactor" ||
        head == "cache_write" || head == "cache_read") {
      std::string stage = name();
      expect(",");
      std::string loop = loop_ref();
      std::vector<int64_t> layout;
      if (head == "cache_write") {
        while (accept(",")) layout.push_back(integer());
      }
      expect(")");
      if (head == "compute_at") return compute_at(stage, loop);
      if (head == "reverse_compute_at") return reverse_compute_at(stage, loop);
      if (head == "rfactor") return rfactor(stage, loop);
      return head == "cache_write" ? cache_write(stage, loop, layout) : cache_read(stage, loop);
    }
    if (head == "gather") {
      std::string buffer = name();
      expect(",");
      return gather(buffer, loop_list(at, 1, 16, head));
    }
    if (head == "compute_inline" || head == "drop_init" || head == "fuse_write_back") {
      std::string stage = name();
      expect(")");
      if (head == "fuse_write_back") return fuse_write_back(stage);
      return head == "drop_init" ? drop_init(stage) : compute_inline(stage);
    }
    if (head == "pack") {
      std::string buffer = name();
      expect(",");
      int64_t dim = integer();
      expect(",");
      int64_t factor = integer();
      expect(")");
      return pack(buffer, dim, factor);
    }
    if (head == "prefetch") {
      std::string buffer = name();
      expect(",");
      std::string loop = loop_ref();
      expect(",");
      int64_t distance = integer();
      expect(")");
      return prefetch(buffer, loop, distance);
    }
    if (head == "prefetch_next") {
      std::string buffer = name();
      expect(",");
      std::string outer = loop_ref();
      expect(",");
      std::string inner = loop_ref();
      expect(")");
      return prefetch_next(buffer, outer, inner);
    }
    if (head == "merge_dims") {
      std::string buffer = name();
      expect(",");
      int64_t dim = integer();
      expect(")");
      return merge_dims(buffer, dim);
    }
    if (head == "tile" || head == "tile_nd") {
      // Loop names first, then as many sizes.
      std::vector<std::string> loops;
      std::vector<int64_t> sizes;
      do {
        skip_space();
        bool number = pos_ < text_.size() &&
                      (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-');
        if (number) {
          sizes.push_back(integer());
        } else {
          if (!sizes.empty()) fail(pos_, "loop names come before the sizes");
          loops.push_back(loop_ref());
        }
      } while (accept(","));
      expect(")");
      if (loops.size() != sizes.size()) {
        fail(at, fmt::format("{} needs one size per loop, got {} loops and {} sizes", head,
                             loops.size(), sizes.size()));
      }
      if (head == "tile") {
        if (loops.size() != 2)
          fail(at, "tile takes two loops and two sizes; use tile_nd for others");
        return tile(loops[0], loops[1], sizes[0], sizes[1]);
      }
      return tile_nd(loops, sizes);
    }
    if (head == "fuse") {
      auto l = loop_list(at, 2, 2, head);
      return fuse(l[0], l[1]);
    }
    if (head == "vectorize") return vectorize(loop_list(at, 1, 1, head)[0]);
    if (head == "unroll") return unroll(loop_list(at, 1, 1, head)[0]);
    if (head == "parallel") return parallel(loop_list(at, 1, 1, head)[0]);
    if (head == "reverse") return reverse(loop_list(at, 1, 1, head)[0]);
    fail(at, "unknown strategy '" + head + "'");
  }

  static ProgramStrategy fail_strategy() { return tessera::fail<Program>(); }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

ProgramStrategy parse_strategy(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace tessera
