#pragma once
// Every QuintNet executable runs its body through guarded_main: a UserError (bad
// config, missing file, malformed trace, bad flag) becomes one line on stderr and
// exit code 2; any other exception is a bug and exits 1 saying so.
#include <exception>
#include <iostream>
#include <string>

#include "core/error.h"

namespace quintnet::core::cli {

template <typename Body>
int guarded_main(const std::string& program, Body&& body) {
  try {
    return body();
  } catch (const UserError& e) {
    std::cerr << program << ": error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": internal error (please report it): " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace quintnet::core::cli
