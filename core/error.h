#pragma once
// Errors a user can cause. Executables catch UserError, print its message as one
// line on stderr and exit with code 2 (see cli/main_guard.h); anything else is a bug.
#include <stdexcept>
#include <string>

namespace quintnet::core {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A plan (config file or command line) that cannot run: names key, value and fix.
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};

// A schedule action list that is not a correct pipeline schedule.
class ScheduleError : public UserError {
 public:
  using UserError::UserError;
};

// A trace file that cannot be read: names the position and what was expected.
class TraceError : public UserError {
 public:
  using UserError::UserError;
};

// A mesh that does not fit the world size or an axis that does not exist.
class MeshError : public UserError {
 public:
  using UserError::UserError;
};

}  // namespace quintnet::core
