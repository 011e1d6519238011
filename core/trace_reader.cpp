// Reading trace files: streamed.  A million-event trace is ~180 MB of JSON; parsing it
// into one document first takes seconds and gigabytes, so the reader walks the text
// once (nlohmann's SAX interface).  Each traceEvents element is recorded as a short
// list of (key, value) pairs; a well-formed complete event ("X") is decoded straight
// from it, anything else (flows, metadata, a malformed event) is turned into a small
// document for the TraceAssembler, whose checks word the error messages.  Everything
// outside traceEvents (otherData) is built whole.  Should otherData come after traceEvents
// (other tools may order it so), the text is parsed again the plain way, since the
// events' defaults depend on it.
#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/trace.h"

namespace quintnet::core {
namespace {

using Json = nlohmann::json;

class StreamingTraceParser : public nlohmann::json_sax<Json> {
 public:
  explicit StreamingTraceParser(TraceAssembler& a) : assembler_(a) {}

  bool saw_events() const { return saw_events_; }
  bool other_data_late() const { return other_data_late_; }
  bool top_is_object() const { return top_is_object_; }
  const std::string& error() const { return error_; }

  bool null() override { return value(Json(nullptr)); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override { return value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(Json(v)); }
  bool string(string_t& v) override { return value(Json(std::move(v))); }
  bool binary(binary_t&) override { return value(Json(nullptr)); }

  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 1) {
      top_is_object_ = true;
      return true;
    }
    if (in_events_ && depth_ == 3) {  // a traceEvents element
      in_element_ = true;
      fields_.clear();
      args_.clear();
      complex_ = has_args_ = false;
      return true;
    }
    if (in_element_ && depth_ == 4 && stack_.empty() && field_key_ == "args") {
      in_args_ = has_args_ = true;
      return true;
    }
    return open(Json::object());
  }
  bool end_object() override {
    if (in_args_ && depth_ == 4 && stack_.empty()) {
      in_args_ = false;
      --depth_;
      return true;
    }
    if (in_element_ && depth_ == 3 && stack_.empty()) {
      in_element_ = false;
      --depth_;
      finish_element();
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (depth_ == 2 && top_key_ == "traceEvents") {
      in_events_ = saw_events_ = true;
      return true;
    }
    return open(Json::array());
  }
  bool end_array() override {
    if (depth_ == 2 && in_events_) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }
  bool key(string_t& k) override {
    if (depth_ == 1) top_key_ = k;
    else if (in_element_ && stack_.empty()) (in_args_ ? arg_key_ : field_key_) = k;
    else key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    auto colon = what.find("error");
    error_ = "not valid JSON at byte " + std::to_string(position) + ": " +
             (colon != std::string::npos ? what.substr(colon) : what);
    return false;
  }

 private:
  // A value at the current position: inside a document under construction, or a
  // whole top-level value / traceEvents element on its own.
  bool value(Json v) {
    if (stack_.empty()) {
      if (in_element_) record(std::move(v));
      else complete(std::move(v));
      return true;
    }
    place(std::move(v));
    return true;
  }
  void record(Json v) {
    if (in_args_) args_.emplace_back(arg_key_, std::move(v));
    else fields_.emplace_back(field_key_, std::move(v));
  }
  Json* place(Json v) {
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool open(Json container) {
    if (stack_.empty()) {
      root_ = std::move(container);
      stack_.push_back(&root_);
    } else {
      stack_.push_back(place(std::move(container)));
    }
    return true;
  }
  bool close() {
    --depth_;
    if (stack_.empty()) return true;  // the top-level object
    stack_.pop_back();
    if (stack_.empty()) {
      if (in_element_) {  // a nested value inside an element: the checked path reads it
        complex_ = true;
        record(std::move(root_));
      } else {
        complete(std::move(root_));
      }
    }
    return true;
  }

  // Last one wins, as in a parsed document.
  static const Json* find(const std::vector<std::pair<std::string, Json>>& v, const char* key) {
    for (auto it = v.rbegin(); it != v.rend(); ++it)
      if (it->first == key) return &it->second;
    return nullptr;
  }

  void finish_element() {
    const std::size_t index = index_++;
    if (!complex_ && decode_complete_event(index)) return;
    Json e = Json::object();
    for (auto& [k, v] : fields_) e[k] = std::move(v);
    if (has_args_) {
      Json a = Json::object();
      for (auto& [k, v] : args_) a[k] = std::move(v);
      e["args"] = std::move(a);
    }
    assembler_.event(e, index);
  }

  // The fast path: an "X" event whose fields all have the expected types and ranges.
  bool decode_complete_event(std::size_t index) {
    const Json* ph = find(fields_, "ph");
    if (!ph || !ph->is_string() || ph->get_ref<const std::string&>() != "X") return false;
    const Json *name = find(fields_, "name"), *cat = find(fields_, "cat"), *pid = find(fields_, "pid"),
               *tid = find(fields_, "tid"), *ts = find(fields_, "ts"), *dur = find(fields_, "dur");
    if ((name && !name->is_string()) || (cat && !cat->is_string())) return false;
    if (!pid || !pid->is_number_integer() || !tid || !tid->is_number_integer()) return false;
    const std::int64_t rank = pid->get<std::int64_t>(), lane = tid->get<std::int64_t>();
    if (rank < 0 || rank >= (1 << 24) - 1 || lane < 0 || lane >= kNumLanes) return false;
    if (!ts || !ts->is_number() || (dur && !dur->is_number())) return false;
    const double t = ts->get<double>(), d = dur ? dur->get<double>() : 0.0;
    if (!std::isfinite(t) || t < -1e18 || t > 1e18 || !std::isfinite(d) || d < 0 || d > 1e18) return false;
    auto arg = [&](const char* key, std::int64_t fallback, bool& ok) {
      const Json* v = find(args_, key);
      if (!v) return fallback;
      if (!v->is_number_integer()) ok = false;
      return ok ? v->get<std::int64_t>() : fallback;
    };
    bool ok = true;
    TraceEvent ev;
    ev.name = name ? name->get<std::string>() : "";
    ev.kind = cat ? cat->get<std::string>() : "";
    ev.rank = static_cast<int>(rank);
    ev.lane = static_cast<Lane>(lane);
    ev.ts_us = t;
    ev.dur_us = d;
    ev.step = static_cast<int>(arg("step", 0, ok));
    ev.mb = static_cast<int>(arg("mb", -1, ok));
    ev.chunk = static_cast<int>(arg("chunk", -1, ok));
    ev.bytes = arg("bytes", 0, ok);
    ev.peer = static_cast<int>(arg("peer", -1, ok));
    std::optional<std::int64_t> coords[3];
    const char* names[3] = {"dp", "tp", "pp"};
    for (int k = 0; k < 3; ++k)
      if (find(args_, names[k])) coords[k] = arg(names[k], 0, ok);
    if (!ok) return false;
    assembler_.add_event(std::move(ev), coords, index);
    return true;
  }
  void complete(Json v) {
    if (in_events_ && depth_ == 2) {
      assembler_.event(v, index_++);
    } else if (depth_ == 1 && top_key_ == "otherData") {
      if (saw_events_) other_data_late_ = true;
      else assembler_.other_data(v);
    }
  }

  TraceAssembler& assembler_;
  int depth_ = 0;
  std::string top_key_, key_;
  bool in_events_ = false, saw_events_ = false, other_data_late_ = false, top_is_object_ = false;
  // The traceEvents element being read.
  bool in_element_ = false, in_args_ = false, has_args_ = false, complex_ = false;
  std::string field_key_, arg_key_;
  std::vector<std::pair<std::string, Json>> fields_, args_;
  std::vector<Json*> stack_;
  Json root_;
  std::size_t index_ = 0;
  std::string error_;
};

}  // namespace

Trace parse_trace_text(const std::string& text, const std::string& origin) {
  // No event takes fewer than ~20 bytes: a bound for sane rank numbers.
  TraceAssembler assembler(origin, text.size() / 20 + 1);
  assembler.reserve(text.size() / 200);  // our events take ~180 bytes each
  StreamingTraceParser parser(assembler);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &parser);
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    throw TraceError(origin + ": not valid JSON: " + e.what());
  }
  if (!ok) throw TraceError(origin + ": " + (parser.error().empty() ? "not valid JSON" : parser.error()));
  if (!parser.top_is_object() || !parser.saw_events())
    throw TraceError(origin + ": not a Chrome trace: expected an object with a \"traceEvents\" list");
  if (parser.other_data_late()) return trace_from_json(Json::parse(text), origin);
  return assembler.finish();
}

Trace read_trace(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TraceError(path + ": cannot open the trace (" + std::string(std::strerror(errno)) + ")");
  // One read into a string of the file's size: growing it chunk by chunk copies a
  // large trace several times over.
  std::string text;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    const long size = std::ftell(f);
    std::rewind(f);
    if (size > 0) text.resize(static_cast<size_t>(size));
    text.resize(std::fread(text.data(), 1, text.size(), f));
  }
  char buffer[1 << 16];  // whatever the size did not cover (a pipe, a growing file)
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) text.append(buffer, n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw TraceError(path + ": reading the trace failed");
  return parse_trace_text(text, path);
}

}  // namespace quintnet::core
