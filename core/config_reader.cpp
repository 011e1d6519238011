#include "core/config_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#ifdef QN_HAVE_YAML
#include <yaml-cpp/yaml.h>
#endif

#include "core/error.h"

namespace quintnet::core {

using Json = nlohmann::json;

namespace {


std::string short_value(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

#ifdef QN_HAVE_YAML
// YAML 1.2 core schema: null, booleans, integers, floats, else a string.  Quoted
// scalars are always strings.
Json scalar_to_json(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(begin, &end, 10);
  if (*end == '\0' && end != begin && errno == 0) return i;
  errno = 0;
  double d = std::strtod(begin, &end);
  if (*end == '\0' && end != begin && s.find_first_of("0123456789") != std::string::npos) return d;
  return s;
}

Json yaml_to_json(const YAML::Node& node, std::map<std::string, int>* lines, const std::string& prefix,
                  int depth) {
  if (depth > 64) throw ConfigError("config nests deeper than 64 levels");
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Scalar: return scalar_to_json(node);
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item, nullptr, "", depth + 1));
      return out;
    }
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : node) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : kv.first.as<std::string>("?");
        if (lines && depth < 2) (*lines)[prefix + key] = kv.first.Mark().line + 1;
        out[key] = yaml_to_json(kv.second, depth < 1 ? lines : nullptr, prefix + key + ".", depth + 1);
      }
      return out;
    }
  }
  return nullptr;
}
#endif

}  // namespace

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

ConfigReader::ConfigReader(Json doc, std::string origin) : doc_(std::move(doc)), origin_(std::move(origin)) {
  if (!doc_.is_object())
    throw ConfigError(origin_ + ": the config must be a mapping of keys to values (e.g. 'batch_size: 32'), got " +
                      short_value(doc_));
}

ConfigReader ConfigReader::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path + ": cannot open the config file (" + std::string(std::strerror(errno)) +
                      "); check the path (examples: experiments/configs/vit_3d.yaml)");
  std::ostringstream text;
  text << in.rdbuf();
  return from_text(text.str(), path);
}

ConfigReader ConfigReader::from_text(const std::string& text, const std::string& origin) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    try {
      return ConfigReader(Json::parse(text), origin);
    } catch (const Json::parse_error& e) {
      throw ConfigError(origin + ": JSON syntax error at byte " + std::to_string(e.byte) + ": " +
                        std::string(e.what()).substr(std::string(e.what()).find(':') + 2));
    } catch (const Json::exception& e) {  // e.g. a number too large for a double
      throw ConfigError(origin + ": invalid JSON: " + e.what());
    }
  }
#ifndef QN_HAVE_YAML
  throw ConfigError(origin + ": this build reads JSON plans only (yaml-cpp was missing when it was built); "
                    "write the plan as JSON or install libyaml-cpp-dev and rebuild");
#else
  std::map<std::string, int> lines;
  Json doc;
  try {
    YAML::Node root = YAML::Load(text);
    doc = yaml_to_json(root, &lines, "", 0);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  if (doc.is_null()) throw ConfigError(origin + ": the config file is empty; see experiments/configs/ for examples");
  ConfigReader reader(std::move(doc), origin);
  reader.lines_ = std::move(lines);
  return reader;
#endif
}

bool ConfigReader::has(const std::string& key) const { return doc_.contains(key) && !doc_[key].is_null(); }

const Json* ConfigReader::find(const std::string& key) {
  used_.insert(key);
  if (!has(key)) return nullptr;
  return &doc_[key];
}

void ConfigReader::accept(const std::string& key) { used_.insert(key); }

ConfigReader ConfigReader::child(const std::string& key) {
  const Json* v = find(key);
  if (!v) return ConfigReader(Json::object(), origin_);
  if (!v->is_object()) fail(key, "expected a mapping of keys (e.g. 'n_embd: 768'), got " + short_value(*v));
  ConfigReader out(*v, origin_);
  out.prefix_ = prefix_ + key + ".";
  for (const auto& [k, line] : lines_)
    if (k.rfind(key + ".", 0) == 0) out.lines_[k.substr(key.size() + 1)] = line;
  return out;
}

std::string ConfigReader::where(const std::string& key) const {
  auto it = lines_.find(key);
  std::string pos = origin_ + (it != lines_.end() ? ":" + std::to_string(it->second) : "");
  return pos + ": " + prefix_ + key;
}

void ConfigReader::fail(const std::string& key, const std::string& message) const {
  throw ConfigError(where(key) + ": " + message);
}

std::int64_t ConfigReader::get_int(const std::string& key, std::int64_t fallback, std::int64_t min,
                                   std::int64_t max) {
  const Json* v = find(key);
  if (!v) return fallback;
  double d = 0;
  if (v->is_number_integer()) {
    d = static_cast<double>(v->get<std::int64_t>());
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) d = 1e300;
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
    d = v->get<double>();
  } else {
    fail(key, "expected a whole number, got " + short_value(*v));
  }
  if (d < static_cast<double>(min) || d > static_cast<double>(max))
    fail(key, short_value(*v) + " is out of range; use a whole number from " + std::to_string(min) + " to " +
                  std::to_string(max));
  return static_cast<std::int64_t>(d);
}

double ConfigReader::get_double(const std::string& key, double fallback, double min, double max) {
  const Json* v = find(key);
  if (!v) return fallback;
  double d = 0;
  if (v->is_number()) {
    d = v->get<double>();
  } else if (v->is_string()) {  // "1e-4" written in quotes, as YAML 1.1 users do
    const std::string& s = v->get_ref<const std::string&>();
    char* end = nullptr;
    d = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') fail(key, "expected a number, got " + short_value(*v));
  } else {
    fail(key, "expected a number, got " + short_value(*v));
  }
  if (!std::isfinite(d) || d < min || d > max) {
    std::ostringstream msg;
    msg << short_value(*v) << " is out of range; use a number from " << min << " to " << max;
    fail(key, msg.str());
  }
  return d;
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) {
  const Json* v = find(key);
  if (!v) return fallback;
  if (!v->is_string()) fail(key, "expected text, got " + short_value(*v));
  return v->get<std::string>();
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) {
  const Json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, "expected true or false, got " + short_value(*v));
  return v->get<bool>();
}

std::vector<int> ConfigReader::get_int_list(const std::string& key, const std::vector<int>& fallback) {
  const Json* v = find(key);
  if (!v) return fallback;
  if (!v->is_array() || v->empty() || v->size() > 16)
    fail(key, "expected a list of 1 to 16 whole numbers such as [2, 2, 2], got " + short_value(*v));
  std::vector<int> out;
  for (const auto& item : *v) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < 1 || item.get<std::int64_t>() > (1 << 24))
      fail(key, "expected whole numbers from 1 to 16777216, got " + short_value(item) + " in " + short_value(*v));
    out.push_back(static_cast<int>(item.get<std::int64_t>()));
  }
  return out;
}

std::vector<std::string> ConfigReader::get_string_list(const std::string& key,
                                                       const std::vector<std::string>& fallback) {
  const Json* v = find(key);
  if (!v) return fallback;
  if (!v->is_array() || v->size() > 16)
    fail(key, "expected a list of names such as ['dp', 'tp', 'pp'], got " + short_value(*v));
  std::vector<std::string> out;
  for (const auto& item : *v) {
    if (!item.is_string()) fail(key, "expected names (text), got " + short_value(item) + " in " + short_value(*v));
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<std::string> ConfigReader::unknown_key_warnings(const std::vector<std::string>& known) const {
  std::vector<std::string> out;
  for (const auto& [key, value] : doc_.items()) {
    if (used_.count(key)) continue;
    std::string best;
    int best_d = 1 << 30;
    for (const auto& k : known) {
      int d = edit_distance(key, k);
      if (d < best_d) best_d = d, best = k;
    }
    std::string line = where(key) + ": unknown key ignored";
    if (!best.empty() && best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3))
      line += " (did you mean '" + best + "'?)";
    out.push_back(line);
  }
  return out;
}

}  // namespace quintnet::core
