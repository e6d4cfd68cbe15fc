// fp8scale apps: what the command-line programs share to read their flags:
// a reader of "--flag value" / "--flag=value" arguments and strict parsers
// of integers, floats and comma lists. Each program keeps its own flags,
// options struct and messages.
#pragma once

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace fp8scale {
namespace cli {

/// The comma-separated items of `s` ("" gives one empty item).
inline std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// A decimal integer in [lo, hi], the whole string.
inline std::optional<long long> parseInt(const std::string& s, long long lo, long long hi) {
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;  // incl. overflow
  return v;
}

/// A finite-or-infinite float, the whole string (NaN and out-of-range refused).
inline std::optional<float> parseFloat(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !(v == v)) return std::nullopt;
  return static_cast<float>(v);
}

/// Walks argv[1..]: flag() is the current argument with any "=value" cut
/// off; value() is that value or, after takeValue(), the next argument.
class FlagReader {
 public:
  FlagReader(int argc, const char* const* argv) : argc_(argc), argv_(argv) {}

  /// Moves to the next argument; false past the last.
  bool next() {
    if (++i_ >= argc_) return false;
    flag_ = argv_[i_];
    value_.clear();
    inline_ = false;
    if (flag_.rfind("--", 0) == 0) {
      const std::size_t eq = flag_.find('=');
      if (eq != std::string::npos) {
        value_ = flag_.substr(eq + 1);
        flag_ = flag_.substr(0, eq);
        inline_ = true;
      }
    }
    return true;
  }

  /// For a flag without a value: the message when "=value" was given.
  std::optional<std::string> noValue() const {
    if (inline_) return flag_ + " takes no value (got '" + value_ + "')";
    return std::nullopt;
  }

  /// For a flag with a value: takes "=value" or the next argument; the
  /// message when there is none.
  std::optional<std::string> takeValue() {
    if (inline_) return std::nullopt;
    if (i_ + 1 >= argc_) return flag_ + " needs a value (see --help)";
    value_ = argv_[++i_];
    return std::nullopt;
  }

  /// The message for a flag whose value is refused: "--flag 'value': why".
  std::string badValue(const std::string& why) const { return flag_ + " '" + value_ + "': " + why; }

  const std::string& flag() const { return flag_; }
  /// The current argument as given (with any "=value").
  std::string argument() const { return argv_[i_]; }
  const std::string& value() const { return value_; }

 private:
  int argc_;
  const char* const* argv_;
  int i_ = 0;
  std::string flag_;
  std::string value_;
  bool inline_ = false;
};

}  // namespace cli
}  // namespace fp8scale
