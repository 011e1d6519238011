#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace quintnet::core {
namespace {

std::string reason() { return std::strerror(errno); }

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// fsync, retried when a signal interrupts it.
bool sync_fd(int fd) {
  while (::fsync(fd) != 0)
    if (errno != EINTR) return false;
  return true;
}

}  // namespace

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw UserError(dir + ": cannot open the directory to make its entries durable (" + reason() + ")");
  const bool ok = sync_fd(fd);
  const int error = errno;
  ::close(fd);
  // Some file systems cannot sync a directory (EINVAL): nothing more can be done there.
  if (!ok && error != EINVAL)
    throw UserError(dir + ": cannot make its entries durable (" + std::strerror(error) + ")");
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError(path + ": cannot write (" + reason() + ")");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = reason();
      ::close(fd);
      std::remove(tmp.c_str());
      throw UserError(path + ": writing failed (" + why + ")");
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = sync_fd(fd);
  const std::string why = reason();
  if (::close(fd) != 0 || !synced) {
    std::remove(tmp.c_str());
    throw UserError(path + ": writing failed (" + why + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why_rename = reason();
    std::remove(tmp.c_str());
    throw UserError(path + ": cannot move the file into place (" + why_rename + ")");
  }
  sync_directory(parent_of(path));
}

void move_into_place(const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(path + ": the finished file " + tmp + " cannot be opened (" + reason() + ")");
  const bool synced = sync_fd(fd);
  const std::string why = reason();
  ::close(fd);
  if (!synced) throw UserError(path + ": cannot make the file durable (" + why + ")");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why_rename = reason();
    std::remove(tmp.c_str());
    throw UserError(path + ": cannot move the file into place (" + why_rename + ")");
  }
  sync_directory(parent_of(path));
}

}  // namespace quintnet::core
