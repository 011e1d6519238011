#pragma once
// ConfigReader — typed access to one YAML or JSON config document.
//
// It turns a file into a JSON tree (YAML scalars typed the YAML 1.2 way), keeps the
// line of each key for messages, hands out values with range checks, and remembers
// which keys were read so the rest can be reported as unknown.  Every problem is a
// ConfigError of the form "FILE:LINE: KEY: what is wrong; how to fix it".
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace quintnet::core {

class ConfigReader {
 public:
  // Reads a .yaml/.yml/.json file (decided by content: a document starting with '{'
  // is JSON).  Throws ConfigError for a missing file or a syntax error, with position.
  static ConfigReader from_file(const std::string& path);
  // Parses text; `origin` names it in messages (a file name or "<string>").
  static ConfigReader from_text(const std::string& text, const std::string& origin);
  // Wraps an existing JSON object (e.g. a plan stored in a trace's otherData).
  ConfigReader(nlohmann::json doc, std::string origin);

  bool has(const std::string& key) const;
  // The nested reader of an object-valued key (GPT-2's model_config).
  ConfigReader child(const std::string& key);

  std::int64_t get_int(const std::string& key, std::int64_t fallback, std::int64_t min,
                       std::int64_t max = std::int64_t{1} << 40);
  double get_double(const std::string& key, double fallback, double min, double max = 1e30);
  std::string get_string(const std::string& key, const std::string& fallback);
  bool get_bool(const std::string& key, bool fallback);
  std::vector<int> get_int_list(const std::string& key, const std::vector<int>& fallback);
  std::vector<std::string> get_string_list(const std::string& key,
                                           const std::vector<std::string>& fallback);
  // Marks a key as known without reading it (keys the original configs carry that do
  // not change what QuintNet does, e.g. num_workers of a Python DataLoader).
  void accept(const std::string& key);

  // Keys present but never read, with the nearest known key among `known`, as
  // warning lines: "config.yaml:7: unknown key 'learing_rate' ignored (did you mean 'learning_rate'?)".
  std::vector<std::string> unknown_key_warnings(const std::vector<std::string>& known) const;

  // "FILE:LINE: KEY" (or "FILE: KEY" when the line is unknown), the prefix of messages.
  std::string where(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  const nlohmann::json& document() const { return doc_; }
  const std::string& origin() const { return origin_; }

 private:
  const nlohmann::json* find(const std::string& key);

  nlohmann::json doc_;
  std::string origin_;
  std::string prefix_;                 // "model_config." for a child
  std::map<std::string, int> lines_;   // key -> 1-based line (YAML only)
  std::set<std::string> used_;
};

// Levenshtein distance, for "did you mean" suggestions.
int edit_distance(const std::string& a, const std::string& b);

}  // namespace quintnet::core
