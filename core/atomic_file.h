#pragma once
// Writing a file so that readers see either the old contents or the complete new
// ones, never half a file: write a temporary file next to it, then rename() it
// into place (atomic within one file system).  Used for traces, checkpoint shards
// and manifests, where a crash mid-write must not leave something that looks valid.
#include <string>

namespace quintnet::core {

// Throws UserError naming the path and the system's reason (disk full, no permission).
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace quintnet::core
