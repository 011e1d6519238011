// Reading trace files fast.  A million-event trace is ~180 MB of JSON; building it as one
// document takes seconds and gigabytes, and even nlohmann's streaming lexer alone takes
// over a second, so the reader scans the text itself, once, with no allocation per value:
//   - each traceEvents element that is a plain complete event ("X": flat fields, numbers
//     and plain ASCII strings, a flat "args") is decoded straight into a TraceEvent;
//   - any other element (flows, metadata, escapes, nested values, a wrong type) is cut out
//     of the text and given to nlohmann and the TraceAssembler, whose checks word the
//     error messages exactly as for a parsed document;
//   - otherData is parsed by nlohmann as a whole (it is small).
// Text the scanner does not accept (a syntax error, a top level that is not an object,
// otherData after traceEvents — the events' defaults depend on it) goes to the checked
// path: nlohmann finds the syntax error and its byte offset, or the document path reads it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/trace.h"

namespace quintnet::core {
namespace {

using Json = nlohmann::json;

// Why the scanner gave the text to the checked path.
struct NotForScanner {};

class TraceScanner {
 public:
  TraceScanner(std::string_view text, TraceAssembler& a) : p_(text.data()), end_(text.data() + text.size()), a_(a) {}

  // Throws NotForScanner for anything outside the fast path's grammar.
  void scan() {
    skip_ws();
    expect('{');
    skip_ws();
    bool saw_events = false;
    if (peek() != '}') {
      for (;;) {
        const std::string_view key = plain_string();
        skip_ws();
        expect(':');
        skip_ws();
        if (key == "traceEvents") {
          if (saw_events) throw NotForScanner{};  // a repeated key: the document path decides
          saw_events = true;
          events();
        } else if (key == "otherData") {
          if (saw_events) throw NotForScanner{};  // too late for the events' defaults
          a_.other_data(parse_value());
        } else {
          parse_value();  // unused, but nlohmann checks it (escapes, UTF-8)
        }
        if (!more('}')) break;
      }
    }
    skip_ws();
    if (p_ != end_ || !saw_events) throw NotForScanner{};
  }

 private:
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  void expect(char c) {
    if (peek() != c) throw NotForScanner{};
    ++p_;
  }
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // After a member or an element: true when a ',' announces another (whitespace after it
  // skipped), false when `close` ends the list (consumed); anything else is not for us.
  bool more(char close) {
    skip_ws();
    if (peek() == ',') {
      ++p_;
      skip_ws();
      return true;
    }
    expect(close);
    return false;
  }

  // A string of printable ASCII without escapes, returned without its quotes.
  std::string_view plain_string() {
    expect('"');
    const char* begin = p_;
    while (p_ < end_ && *p_ != '"') {
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c >= 0x80 || c == '\\') throw NotForScanner{};
      ++p_;
    }
    expect('"');
    return {begin, static_cast<size_t>(p_ - 1 - begin)};
  }

  // A JSON number; `integer` says whether it has neither fraction nor exponent.
  struct Number {
    double value = 0;
    std::int64_t integer_value = 0;
    bool integer = false;
  };
  Number number() {
    const char* begin = p_;
    if (peek() == '-') ++p_;
    if (peek() == '0') ++p_;
    else if (peek() >= '1' && peek() <= '9') while (std::isdigit(static_cast<unsigned char>(peek()))) ++p_;
    else throw NotForScanner{};
    bool integer = true;
    if (peek() == '.') {
      integer = false;
      ++p_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) throw NotForScanner{};
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++p_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integer = false;
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) throw NotForScanner{};
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++p_;
    }
    Number n;
    n.integer = integer;
    if (integer) {
      // Integers beyond 64 bits become unsigned or floating point in nlohmann: not ours.
      if (std::from_chars(begin, p_, n.integer_value).ec != std::errc()) throw NotForScanner{};
      n.value = static_cast<double>(n.integer_value);
    } else if (std::from_chars(begin, p_, n.value).ec != std::errc()) {
      throw NotForScanner{};  // out of a double's range: nlohmann's error message
    }
    return n;
  }

  // Skips one value of any kind, checking its syntax (nesting bounded by the text).
  void skip_value() {
    switch (peek()) {
      case '"': skip_string(); return;
      case '{': case '[': {
        const char close = *p_ == '{' ? '}' : ']';
        ++p_;
        skip_ws();
        if (peek() == close) {
          ++p_;
          return;
        }
        for (;;) {
          if (close == '}') {
            skip_string();
            skip_ws();
            expect(':');
            skip_ws();
          }
          skip_value();
          if (!more(close)) return;
        }
      }
      case 't': literal("true"); return;
      case 'f': literal("false"); return;
      case 'n': literal("null"); return;
      default: number(); return;
    }
  }
  void skip_string() {
    expect('"');
    while (p_ < end_ && *p_ != '"') {
      if (static_cast<unsigned char>(*p_) < 0x20) throw NotForScanner{};
      p_ += *p_ == '\\' ? 2 : 1;  // the escape's meaning is nlohmann's to check
    }
    expect('"');
  }
  void literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      throw NotForScanner{};
    p_ += word.size();
  }
  // One value, parsed by nlohmann (it checks escapes and UTF-8).
  Json parse_value() {
    const char* begin = p_;
    skip_value();
    try {
      return Json::parse(begin, p_);
    } catch (const Json::exception&) {
      throw NotForScanner{};
    }
  }

  void events() {
    expect('[');
    skip_ws();
    if (peek() == ']') {
      ++p_;
      return;
    }
    for (std::size_t index = 0;; ++index) {
      const char* begin = p_;
      bool decoded = false;
      try {
        decoded = complete_event(index);
      } catch (const NotForScanner&) {  // e.g. an escape in a name: nlohmann reads it
      }
      if (!decoded) {
        p_ = begin;
        a_.event(parse_value(), index);
      }
      if (!more(']')) return;
    }
  }

  // The fast path: a flat "X" event whose fields have the expected types and ranges.
  // Returns false or throws NotForScanner (position undefined) for anything else.
  // Last key wins, as in a document.
  bool complete_event(std::size_t index) {
    if (peek() != '{') return false;
    ++p_;
    std::string_view ph, name, cat;
    std::optional<Number> pid, tid, ts, dur, step, mb, chunk, bytes, peer, id;
    bool id_negative = false;
    std::optional<Number> coords[3];
    bool has_ph = false;
    skip_ws();
    if (peek() == '}') return false;
    for (;;) {
      if (peek() != '"') return false;
      const std::string_view key = plain_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "args") {
        if (!flat_args(step, mb, chunk, bytes, peer, coords)) return false;
      } else if (peek() == '"') {
        const std::string_view s = plain_string();
        if (key == "ph") ph = s, has_ph = true;
        else if (key == "name") name = s;
        else if (key == "cat") cat = s;
        else if (key == "pid" || key == "tid" || key == "ts" || key == "dur") return false;
      } else if (peek() == '-' || std::isdigit(static_cast<unsigned char>(peek()))) {
        const bool negative = peek() == '-';
        const Number n = number();
        if (key == "id") id = n, id_negative = negative;
        if (key == "pid") pid = n;
        else if (key == "tid") tid = n;
        else if (key == "ts") ts = n;
        else if (key == "dur") dur = n;
        else if (key == "ph" || key == "name" || key == "cat") return false;
      } else {
        return false;
      }
      if (!more('}')) break;
    }
    if (has_ph && (ph == "s" || ph == "f")) return flow_end(ph == "s", id, id_negative, pid, tid, ts);
    // A complete event needs its duration as much as its start (the document path says which is missing).
    if (!has_ph || ph != "X" || !pid || !pid->integer || !tid || !tid->integer || !ts || !dur) return false;
    const std::int64_t rank = pid->integer_value, lane = tid->integer_value;
    if (rank < 0 || rank >= (1 << 24) - 1 || lane < 0 || lane >= kNumLanes) return false;
    const double t = ts->value, d = dur->value;
    if (!std::isfinite(t) || t < -1e18 || t > 1e18 || !std::isfinite(d) || d < 0 || d > 1e18) return false;
    for (const auto* a : {&step, &mb, &chunk, &bytes, &peer, &coords[0], &coords[1], &coords[2]})
      if (*a && !(*a)->integer) return false;
    auto get = [](const std::optional<Number>& n, std::int64_t fallback) { return n ? n->integer_value : fallback; };
    TraceEvent ev;
    ev.name.assign(name);
    ev.kind.assign(cat);
    ev.rank = static_cast<int>(rank);
    ev.lane = static_cast<Lane>(lane);
    ev.ts_us = t;
    ev.dur_us = d;
    ev.step = static_cast<int>(get(step, 0));
    ev.mb = static_cast<int>(get(mb, -1));
    ev.chunk = static_cast<int>(get(chunk, -1));
    ev.bytes = get(bytes, 0);
    ev.peer = static_cast<int>(get(peer, -1));
    std::optional<std::int64_t> c[3];
    for (int k = 0; k < 3; ++k)
      if (coords[k]) c[k] = coords[k]->integer_value;
    a_.add_event(std::move(ev), c, index);
    return true;
  }

  // A flow's start or finish whose id, rank, lane and time are all in range; anything
  // else goes to the document path, which says what is wrong.
  bool flow_end(bool start, const std::optional<Number>& id, bool id_negative, const std::optional<Number>& pid,
                const std::optional<Number>& tid, const std::optional<Number>& ts) {
    if (!id || !id->integer || id_negative || !pid || !pid->integer || !tid || !tid->integer || !ts) return false;
    const std::int64_t rank = pid->integer_value, lane = tid->integer_value;
    if (rank < 0 || rank > (1 << 24) - 1 || lane < 0 || lane >= kNumLanes) return false;  // the document path's pid range
    const double t = ts->value;
    if (!std::isfinite(t) || t < -1e18 || t > 1e18) return false;
    a_.add_flow_end(static_cast<std::uint64_t>(id->integer_value), start, static_cast<int>(rank), static_cast<int>(lane), t);
    return true;
  }

  // "args": an object of numbers and plain strings; the integers the model reads kept.
  bool flat_args(std::optional<Number>& step, std::optional<Number>& mb, std::optional<Number>& chunk,
                 std::optional<Number>& bytes, std::optional<Number>& peer, std::optional<Number> (&coords)[3]) {
    if (peek() != '{') return false;
    ++p_;
    skip_ws();
    if (peek() == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      if (peek() != '"') return false;
      const std::string_view key = plain_string();
      skip_ws();
      expect(':');
      skip_ws();
      std::optional<Number> value;
      if (peek() == '"') plain_string();
      else if (peek() == '-' || std::isdigit(static_cast<unsigned char>(peek()))) value = number();
      else return false;
      std::optional<Number>* slot = key == "step"    ? &step
                                    : key == "mb"    ? &mb
                                    : key == "chunk" ? &chunk
                                    : key == "bytes" ? &bytes
                                    : key == "peer"  ? &peer
                                    : key == "dp"    ? &coords[0]
                                    : key == "tp"    ? &coords[1]
                                    : key == "pp"    ? &coords[2]
                                                     : nullptr;
      if (slot) {
        if (!value) return false;  // a string where a number belongs: the checked path words it
        *slot = value;
      }
      if (!more('}')) return true;
    }
  }

  const char* p_;
  const char* end_;
  TraceAssembler& a_;
};

// The checked path's syntax check: nlohmann's parser without building anything, for the
// message and byte offset of the first error.
class SyntaxCheck : public nlohmann::json_sax<Json> {
 public:
  const std::string& error() const { return error_; }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool key(string_t&) override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    const std::string what = e.what();
    const auto at = what.find("error");
    error_ = "not valid JSON at byte " + std::to_string(position) + ": " +
             (at != std::string::npos ? what.substr(at) : what);
    return false;
  }

 private:
  std::string error_;
};

Trace parse_checked(std::string_view text, const std::string& origin) {
  SyntaxCheck check;
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &check);
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    throw TraceError(origin + ": not valid JSON: " + e.what());
  }
  if (!ok) throw TraceError(origin + ": " + (check.error().empty() ? "not valid JSON" : check.error()));
  return trace_from_json(Json::parse(text.begin(), text.end()), origin);
}

}  // namespace

Trace parse_trace_text(std::string_view text, const std::string& origin) {
  // No event takes fewer than ~20 bytes: a bound for sane rank numbers.
  TraceAssembler assembler(origin, text.size() / 20 + 1);
  // Our events take ~180 bytes each; reserving for more costs only address space, and
  // growing the vector would copy a million events.
  assembler.reserve(text.size() / 100);
  try {
    TraceScanner(text, assembler).scan();
  } catch (const NotForScanner&) {
    return parse_checked(text, origin);
  }
  return assembler.finish();
}

Trace read_trace(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw TraceError(path + ": cannot open the trace (" + std::string(std::strerror(errno)) + ")");
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
#ifdef MAP_POPULATE
  // A regular file is mapped with its pages populated in one go: on this kind of virtual
  // machine every page fault is expensive, and reading 180 MB into fresh memory (or
  // mapping it and faulting page by page) costs ~0.6 s where this costs ~0.05 s.
  if (regular) {
    const auto size = static_cast<std::size_t>(st.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw TraceError(path + ": cannot read the trace (" + std::string(std::strerror(errno)) + ")");
    struct Unmap {
      void* p;
      std::size_t n;
      ~Unmap() { ::munmap(p, n); }
    } unmap{map, size};
    return parse_trace_text(std::string_view(static_cast<const char*>(map), size), path);
  }
#endif
  // A pipe, an empty or growing file: read what there is.
  std::string text;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw TraceError(path + ": reading the trace failed (" + std::string(std::strerror(errno)) + ")");
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return parse_trace_text(text, path);
}

}  // namespace quintnet::core
