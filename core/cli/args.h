#pragma once
// A small command-line parser shared by the QuintNet executables: declared options
// ("--name VALUE", "--name=VALUE" or flags; "--node_rank" is "--node-rank", as torchrun
// and argparse users type both), positional arguments, "--help", "--version" (prints
// "PROGRAM VERSION" and exits 0), "--list-options" (the option names, one per line, for
// shell completion), and a UsageError (exit 2) for anything unknown or malformed,
// naming the option.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace quintnet::core::cli {

class UsageError : public UserError {
 public:
  using UserError::UserError;
};

struct OptionSpec {
  std::string name;       // without the leading "--"
  std::string value_name;  // empty for a flag
  std::string help;
  char short_name = 0;  // e.g. 'o' for "-o FILE"
};

class Args {
 public:
  // Throws UsageError for unknown options or a missing value.  With
  // `options_end_at_command` the first positional argument is a command and everything
  // after it is its own (a launcher's "PROGRAM ARGS...", with or without "--").
  Args(const std::string& program, const std::vector<OptionSpec>& specs, int argc, char** argv,
       bool options_end_at_command = false);

  bool help_requested() const { return help_; }
  std::string usage(const std::string& synopsis) const;

  bool flag(const std::string& name) const;
  std::optional<std::string> value(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  int get_int(const std::string& name, int fallback, int min, int max) const;
  // Comma-separated numbers, e.g. "--costs 1,2,1".
  std::vector<double> get_doubles(const std::string& name, size_t min_count, size_t max_count) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::string program_;
  std::vector<OptionSpec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace quintnet::core::cli
