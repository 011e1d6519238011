#pragma once
// Helpers shared by the libFuzzer targets (see docs/HARDENING.md).  Readers that take a
// path get the input through files in a private scratch folder of this process.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace quintnet::fuzz {

// The folder is removed when the fuzzer exits (libFuzzer ends a timed or counted run with
// exit(), which runs static destructors); after a crash it stays, beside the crash input.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "qn-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) std::abort();
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The input split at its first NUL byte: two files from one input.
inline std::pair<std::string_view, std::string_view> split_at_nul(const std::uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

}  // namespace quintnet::fuzz
