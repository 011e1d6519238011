// `quintnet` — the git-style front door.  Built-in verbs (schedule, check-config,
// bubble: core's own) run here; `quintnet VERB ...` runs the executable quintnet-VERB found next to this one
// (train, launch, simulate, view, ...: each module builds its own), so a build
// without a module simply lacks its verbs.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/cli/verbs.h"
#include "core/config_reader.h"
#include "core/install_layout.h"

namespace {

namespace cli = quintnet::core::cli;

struct Verb {
  const char* name;
  const char* help;
  int (*builtin)(int argc, char** argv) = nullptr;  // core's verbs; the others are executables
};

// Verbs of every module, in the order `quintnet --help` lists them.
const std::vector<Verb> kVerbs = {
    {"schedule", "draw and check a pipeline schedule; bubble fraction, memory", cli::schedule_command},
    {"check-config", "validate a plan (YAML/JSON) before running it", cli::check_config_command},
    {"bubble", "a traced run's measured bubble beside what the schedule model predicts", cli::bubble_command},
    {"completion", "print the bash completion script: source <(quintnet completion bash)", cli::completion_command},
    {"launch", "start N local ranks with the torchrun environment"},
    {"train", "train a model on the plan's mesh (LibTorch)"},
    {"checkpoint", "export or reshard checkpoints"},
    {"generate", "sample text from a GPT-2 checkpoint"},
    {"tokenize", "GPT-2 token ids of text files"},
    {"simulate", "predict a plan on a described cluster (SimGrid)"},
    {"calibrate", "fit simulator op times from an executor trace"},
    {"plan", "search the best layout for a model and cluster"},
    {"view", "open traces in the timeline viewer (Qt)"},
    {"render", "render a trace timeline to PNG/SVG without a display"},
};

bool executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

bool in_this_build(const Verb& v, const std::string& dir) { return v.builtin || executable(dir + "/quintnet-" + v.name); }

void print_help() {
  const std::string dir = quintnet::core::executable_dir();
  std::cout << "usage: quintnet VERB [options]   (quintnet VERB --help for a verb's options; quintnet --version)\n\n"
               "QuintNet: 3D-parallel training (exec), its simulation (sim) and timelines (view).\n\n"
               "verbs in this build:\n";
  std::vector<std::string> missing;
  for (const Verb& v : kVerbs) {
    if (in_this_build(v, dir)) {
      std::string name = v.name;
      name.resize(14, ' ');
      std::cout << "  " << name << v.help << '\n';
    } else {
      missing.push_back(v.name);
    }
  }
  if (!missing.empty()) {
    std::cout << "\nnot in this build (their module was switched off at configure time):";
    for (const auto& m : missing) std::cout << ' ' << m;
    std::cout << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::cout << "quintnet " << QN_VERSION << '\n';
    return 0;
  }
  if (!std::strcmp(argv[1], "--list-verbs")) {  // for shell completion: the verbs of this build
    const std::string dir = quintnet::core::executable_dir();
    for (const Verb& v : kVerbs)
      if (in_this_build(v, dir)) std::cout << v.name << '\n';
    return 0;
  }
  const std::string verb = argv[1];
  for (const Verb& v : kVerbs)
    if (v.builtin && verb == v.name) return v.builtin(argc - 1, argv + 1);

  const std::string path = quintnet::core::executable_dir() + "/quintnet-" + verb;
  if (executable(path)) {
    std::vector<char*> args;
    std::string arg0 = "quintnet-" + verb;
    args.push_back(arg0.data());
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    execv(path.c_str(), args.data());
    std::cerr << "quintnet: cannot run " << path << ": " << std::strerror(errno) << '\n';
    return 1;
  }
  std::string best;
  int best_d = 3;
  for (const Verb& v : kVerbs)
    if (int d = quintnet::core::edit_distance(verb, v.name); d < best_d) best_d = d, best = v.name;
  bool known = false;
  for (const Verb& v : kVerbs) known = known || verb == v.name;
  if (known)
    std::cerr << "quintnet: '" << verb << "' is not in this build (its module was switched off at configure "
                 "time; see the configure summary)\n";
  else
    std::cerr << "quintnet: '" << verb << "' is not a quintnet verb" << (best.empty() ? "" : "; did you mean '" + best + "'?")
              << " See 'quintnet --help'.\n";
  return 2;
}
