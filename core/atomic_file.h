#pragma once
// Writing a file so that readers see either the old contents or the complete new
// ones, never half a file — also after a crash or a power loss: write a temporary
// file next to it, fsync it, rename() it into place (atomic within one file system),
// then fsync the directory so the rename itself is on disk.  Used for everything the
// project writes as a result (traces, checkpoint shards and manifests, calibrations,
// exports, pictures), where a crash mid-write must not leave something that looks valid.
#include <string>

namespace quintnet::core {

// Throws UserError naming the path and the system's reason (disk full, no permission).
void write_file_atomically(const std::string& path, const std::string& bytes);

// For a file another library wrote completely under `tmp` (a PNG from Qt): fsync it,
// rename it to `path`, fsync the directory.  Throws UserError.
void move_into_place(const std::string& tmp, const std::string& path);

// Makes the entries of `dir` (a file created or renamed in it) durable.  Throws UserError.
void sync_directory(const std::string& dir);

}  // namespace quintnet::core
