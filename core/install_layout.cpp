#include "core/install_layout.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace quintnet::core {

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  return std::filesystem::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

std::string data_dir() {
  if (const char* env = std::getenv("QN_DATA_DIR"); env && *env) return env;
  // lexically_normal: messages show <prefix>/share/quintnet/data, not <prefix>/bin/../share/...
  return (std::filesystem::path(executable_dir()) / ".." / "share" / "quintnet" / "data").lexically_normal().string();
}

}  // namespace quintnet::core
