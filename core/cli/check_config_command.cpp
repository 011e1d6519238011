// quintnet check-config: load a plan, validate it, print what it will run.
#include <iostream>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/cli/verbs.h"
#include "core/plan.h"
#include "core/plan_keys.h"

namespace quintnet::core::cli {
namespace {

const std::vector<OptionSpec> kOptions = {
    {"world-size", "N", "check the mesh against this many ranks"},
    {"json", "", "print the normalised plan as JSON"},
    {"keys", "", "print every plan key (type, default, range, meaning) as markdown tables"},
};

}  // namespace

int check_config_command(int argc, char** argv) {
  return guarded_main("quintnet check-config", [&] {
    Args args("quintnet check-config", kOptions, argc, argv);
    if (args.help_requested()) {
      std::cout << args.usage("FILE [--world-size N] [--json]  |  --keys")
                << "\nValidates a plan (YAML or JSON; the original QuintNet config keys load unchanged)\n"
                   "before anything runs. Exit 0 when it can run, 2 with the reason when it cannot.\n";
      return 0;
    }
    if (args.flag("keys")) {
      std::cout << plan_keys_markdown();
      return 0;
    }
    if (args.positional().size() != 1)
      throw UsageError("expected one config file, e.g. quintnet check-config "
                       "experiments/configs/vit_3d.yaml");
    std::optional<int> world;
    if (args.value("world-size")) world = args.get_int("world-size", 1, 1, 1 << 24);
    const LoadedPlan loaded = load_plan(args.positional()[0], world);
    for (const auto& w : loaded.warnings) std::cerr << "warning: " << w << '\n';
    const Plan& p = loaded.plan;
    if (args.flag("json")) {
      std::cout << p.to_json().dump(2) << '\n';
      return 0;
    }
    const ModelConfig& m = p.model;
    std::cout << p.source << ": ok\n"
              << "  model      : " << m.kind() << "  layers " << m.layers() << ", hidden " << m.hidden() << ", heads "
              << m.heads() << '\n'
              << "  mesh       : " << p.mesh().shape_string() << "  (" << p.world_size() << " ranks, strategy "
              << p.strategy() << ")\n"
              << "  schedule   : " << schedule_kind_name(p.schedule_kind()) << ", " << p.microbatches()
              << " microbatches" << (p.virtual_stages > 1 ? ", " + std::to_string(p.virtual_stages) + " chunks" : "")
              << '\n'
              << "  batch      : global " << p.batch_size << " = micro " << p.micro_batch_size() << " x "
              << p.microbatches() << " microbatches x dp " << p.dp() << '\n'
              << "  training   : " << p.num_epochs << " epochs, lr " << p.learning_rate << ", max_grad_norm "
              << p.max_grad_norm << ", seed " << p.seed << ", " << core::name_of(p.precision) << '\n';
    return 0;
  });
}

}  // namespace quintnet::core::cli
