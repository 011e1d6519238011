#pragma once
// The verbs built into the `quintnet` front door (core needs nothing else to run
// them).  Verbs of other modules are separate executables named quintnet-VERB.

namespace quintnet::core::cli {

int schedule_command(int argc, char** argv);      // quintnet schedule ...
int check_config_command(int argc, char** argv);  // quintnet check-config FILE ...
int bubble_command(int argc, char** argv);        // quintnet bubble TRACE ...
int completion_command(int argc, char** argv);    // quintnet completion bash

}  // namespace quintnet::core::cli
