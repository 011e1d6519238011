#pragma once
// Runs a piece of SimGrid work in a forked child process.  SimGrid 3.32 supports one
// engine per process: a second engine that loads an XML platform reads memory the first
// one freed (valgrind: EngineImpl::presolve), and state of earlier runs lingers.  The
// planner (several simulations) and the XML platform inspection therefore each get a
// fresh process.
#include <functional>
#include <string>

namespace quintnet::sim {

// Calls `body` in a child process and returns the text it returned.  A core::UserError
// (or other exception) thrown there is thrown again here with its message; a child that
// dies (a crash inside SimGrid) becomes a core::UserError naming `what` and the signal.
std::string run_in_child(const std::string& what, const std::function<std::string()>& body);

}  // namespace quintnet::sim
