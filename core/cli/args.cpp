#include "core/cli/args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "core/config_reader.h"

namespace quintnet::core::cli {

Args::Args(const std::string& program, const std::vector<OptionSpec>& specs, int argc, char** argv,
           bool options_end_at_command)
    : program_(program), specs_(specs) {
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!only_positional && arg.size() == 2 && arg[0] == '-' && arg[1] != '-')  // "-o" -> "--output"
      for (const auto& s : specs_)
        if (s.short_name == arg[1]) arg = "--" + s.name;
    if (only_positional || arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      if (!only_positional && arg.size() > 1 && arg[0] == '-' && arg != "-h")
        throw UsageError("unknown option '" + arg + "'; see '" + program_ + " --help'");
      if (arg == "-h") {
        help_ = true;
        continue;
      }
      positional_.push_back(arg);
      only_positional |= options_end_at_command;
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    std::replace(name.begin(), name.end(), '_', '-');
    if (name == "help") {
      help_ = true;
      continue;
    }
    if (name == "list-options") {  // for shell completion (quintnet completion bash): the option table
      for (const auto& spec : specs_) std::cout << "--" << spec.name << '\n';
      std::cout << "--help\n--version\n";
      std::exit(0);
    }
    if (name == "version") {  // like argparse's version action: print and end here
      std::cout << program_ << ' ' << QN_VERSION << std::endl;
      std::exit(0);
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs_)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::string best;
      int best_d = 3;
      for (const auto& s : specs_)
        if (int d = edit_distance(name, s.name); d < best_d) best_d = d, best = s.name;
      throw UsageError("unknown option '--" + name + "'" +
                       (best.empty() ? "" : " (did you mean '--" + best + "'?)") + "; see '" + program_ + " --help'");
    }
    if (spec->value_name.empty()) {
      if (has_value) throw UsageError("--" + name + " is a flag and takes no value");
      values_[name] = "1";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc)
        throw UsageError("--" + name + " needs a value (" + spec->value_name + ")");
      value = argv[++i];
    }
    values_[name] = value;
  }
}

std::string Args::usage(const std::string& synopsis) const {
  std::ostringstream out;
  out << "usage: " << program_ << " " << synopsis << "\n\noptions:\n";
  for (const auto& s : specs_) {
    std::string left = (s.short_name ? std::string("  -") + s.short_name + ", --" : std::string("  --")) + s.name +
                       (s.value_name.empty() ? "" : " " + s.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    else left += "\n" + std::string(28, ' ');
    out << left << s.help << '\n';
  }
  out << "  --help                    show this help\n";
  out << "  --version                 print the version\n";
  return out.str();
}

bool Args::flag(const std::string& name) const { return values_.count(name) > 0; }

std::optional<std::string> Args::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

int Args::get_int(const std::string& name, int fallback, int min, int max) const {
  auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || n < min || n > max)
    throw UsageError("--" + name + " '" + *v + "': expected a whole number from " +
                     std::to_string(min) + " to " + std::to_string(max));
  return static_cast<int>(n);
}

std::vector<double> Args::get_doubles(const std::string& name, size_t min_count, size_t max_count) const {
  auto v = value(name);
  if (!v) return {};
  std::vector<double> out;
  std::stringstream ss(*v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    double d = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(d) || d < 0)
      throw UsageError("--" + name + " '" + *v + "': '" + item + "' is not a number >= 0");
    out.push_back(d);
  }
  if (out.size() < min_count || out.size() > max_count)
    throw UsageError("--" + name + " '" + *v + "': expected " + std::to_string(min_count) + " to " +
                     std::to_string(max_count) + " comma-separated numbers");
  return out;
}

}  // namespace quintnet::core::cli
