// quintnet-checkpoint: inspect a checkpoint, or merge its shards into one serial file.
//   quintnet checkpoint info runs/vit/ckpt
//   quintnet checkpoint export runs/vit/ckpt -o vit.pt
// The export holds every parameter under its serial name, unsharded (the format of
// `quintnet train --save-params`); any mesh loads it.  Loading a checkpoint into a
// different mesh needs no export: `quintnet train --resume` reshards on the fly.
#include <torch/torch.h>

#include <filesystem>
#include <iostream>

#include "core/atomic_file.h"
#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "exec/checkpoint/manifest.h"
#include "exec/checkpoint/shard_reader.h"
#include "exec/models/registry.h"
#include "exec/models/safetensors.h"
#include "core/plan.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;
using exec::Manifest;
using exec::ShardReader;

const std::vector<OptionSpec> kOptions = {
    {"output", "FILE", "export: where to write the serial parameters (torch pickle)", 'o'},
    {"with-optimizer", "", "export: also write the AdamW moments (keys exp_avg/NAME, exp_avg_sq/NAME)"},
    {"format", "pt|safetensors", "export: torch pickle [pt], or for GPT-2 and Llama a Hugging Face model.safetensors (+ config.json for Llama)"},
};

void info(const std::string& dir, const Manifest& m) {
  long long bytes = 0;
  for (const auto& s : m.shards) bytes += s.bytes;
  std::cout << "checkpoint " << dir << "\n  step " << m.step << " of " << m.total_steps << "\n  model "
            << m.plan.value("model", "?") << ", mesh dp=" << m.dp << " x tp=" << m.tp << " x pp=" << m.pp
            << (m.chunks > 1 ? " (" + std::to_string(m.chunks) + " chunks per rank)" : "") << "\n  " << m.shards.size()
            << " shards, " << bytes / 1024 << " KiB\n";
  if (m.best_val_loss < 1e299) std::cout << "  best validation loss " << m.best_val_loss << "\n";
}

// A GPT-2 or Llama checkpoint as Hugging Face's model.safetensors (its names and layout),
// with a config.json beside it where the model has one.
void export_safetensors(const std::string& dir, const Manifest& m, const std::string& output) {
  const core::ModelConfig config = core::parse_plan_text(m.plan.dump(), dir + "/manifest.json").plan.model;
  const exec::ModelEntry& entry = exec::model_entry(config);
  if (!entry.to_hugging_face)
    throw core::UserError("--format safetensors: the checkpoint holds a " + config.kind() + ", which has no Hugging Face layout");
  ShardReader reader(dir, m);
  exec::SerialState state;
  for (const std::string& name : reader.parameter_names()) state[name] = reader.serial("param/", name);
  exec::write_safetensors(output, entry.to_hugging_face(state, config), {{"format", "pt"}});
  std::cout << "wrote " << output << ": " << config.kind() << " (" << config.layers() << " layers, width " << config.hidden()
            << ") in Hugging Face layout from step " << m.step << "\n";
  if (entry.hugging_face_config) {
    const std::string json = (std::filesystem::path(output).parent_path() / "config.json").string();
    core::write_file_atomically(json, entry.hugging_face_config(config));
    std::cout << "wrote " << json << "\n";
  }
}

void export_serial(const std::string& dir, const Manifest& m, const std::string& output, bool with_optimizer) {
  ShardReader reader(dir, m);
  c10::Dict<std::string, torch::Tensor> out;
  for (const std::string& name : reader.parameter_names()) {
    out.insert(name, reader.serial("param/", name));
    if (with_optimizer)
      for (const char* kind : {"exp_avg/", "exp_avg_sq/"}) out.insert(kind + name, reader.serial(kind, name));
  }
  const std::vector<char> bytes = torch::pickle_save(out);
  core::write_file_atomically(output, std::string(bytes.begin(), bytes.end()));
  std::cout << "wrote " << output << ": " << reader.parameter_names().size() << " parameters (serial layout) from step "
            << m.step << "\n";
}

int checkpoint(int argc, char** argv) {
  Args args("quintnet checkpoint", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("info CHECKPOINT | export CHECKPOINT -o FILE")
              << "\nCHECKPOINT is a step directory or a run directory (its `latest` is used).\n"
                 "To continue on another mesh, pass the checkpoint to quintnet train --resume: it reshards.\n";
    return 0;
  }
  const auto& pos = args.positional();
  if (pos.size() != 2 || (pos[0] != "info" && pos[0] != "export"))
    throw UsageError("expected `info CHECKPOINT` or `export CHECKPOINT -o FILE`");
  const std::string dir = exec::resolve_checkpoint(pos[1]);
  const Manifest m = exec::read_manifest(dir);
  if (pos[0] == "info") {
    info(dir, m);
    return 0;
  }
  const auto output = args.value("output");
  if (!output) throw UsageError("export needs --output FILE (-o FILE)");
  const std::string format = args.get("format", "pt");
  if (format == "safetensors") export_safetensors(dir, m, *output);
  else if (format == "pt") export_serial(dir, m, *output, args.flag("with-optimizer"));
  else throw UsageError("--format " + format + ": choose pt or safetensors");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet checkpoint", [&] { return checkpoint(argc, argv); });
}
