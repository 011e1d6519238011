#pragma once
// When a sent message has certainly arrived.
//
// A pipeline rank posts its sends asynchronously and must keep each sent tensor alive
// until the send completes.  It learns that without asking the transport: once the
// receiver's RECV of the message happened before one of the sender's own later actions —
// through a chain of messages leading back to the sender — the message was delivered.
// With vector clocks over the schedule (a RECV's clock is the later of its rank's and
// its message's SEND's), each sent message gets the sender's first action whose clock
// includes that RECV: the executor waits for the send there (after that action), where the
// wait returns at once, and frees the tensor (exec/pp/pipeline_runner.cpp).  Waiting earlier could
// deadlock (the receiver may first need something this rank has yet to send); waiting
// only at the end of the step kept every microbatch's tensors until then.
#include <vector>

#include "core/schedule.h"
#include "core/schedule_interpreter.h"

namespace quintnet::core {

// For each of `rank`'s actions (in the order of interpret(schedule, rank)), the messages
// this rank sent whose receive happened before that action starts.  A message that no
// later action of the rank is known to follow is in no list (its send is waited for at
// the step's end).  Throws ConfigError if the schedule cannot run (a RECV whose SEND
// never comes).
std::vector<std::vector<Message>> delivered_before(const Schedule& schedule, int rank);

}  // namespace quintnet::core
