// `lansbert verify`: checks every file of a checkpoint (or of each checkpoint under a root)
// against the sizes and CRC32C its trainer.json records. The readers check only what they
// load (eval the weights, a rank of a sharded resume its own slices), so this is the command
// to run before a checkpoint is copied to other storage or the checkpoints before it deleted.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "lansbert/core/byte_text.h"
#include "lansbert/train/checkpoint.h"

namespace lansbert::cli {
namespace {

struct VerifyArgs {
  std::string checkpoint;
  bool all = false;
};

// "ok DIR: ..." on stdout, or the error.
Status verify_one(const std::string& dir) {
  CheckpointInventory inv;
  LB_RETURN_IF_ERROR(verify_whole_checkpoint(dir, &inv));
  const std::string state =
      inv.slices > 0 ? "optimizer state in " + std::to_string(inv.slices) + " slices" : "replicated optimizer state";
  std::printf("ok %s: step %lld of a %d-rank run, %d files of %s checked (%s)\n", dir.c_str(), (long long)inv.step,
              inv.world, inv.files, byte_text(inv.bytes).c_str(), state.c_str());
  return Status::ok();
}

Status run_verify_cmd(const VerifyArgs& a) {
  if (!a.all) {
    std::string dir;
    LB_RETURN_IF_ERROR(resolve_checkpoint(a.checkpoint, &dir));
    const Status st = verify_one(dir);  // its line either way, as --all prints each
    if (!st.is_ok()) std::printf("damaged %s: %s\n", dir.c_str(), st.message().c_str());
    return st;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(a.checkpoint, ec))
    return Status::not_found("--checkpoint " + a.checkpoint + ": no such directory (--all takes a checkpoint.dir)");
  const std::vector<std::string> steps = checkpoint_step_dirs(a.checkpoint);
  if (steps.empty())
    return Status::not_found("--checkpoint " + a.checkpoint + ": no step-NNNNNNNNN checkpoint directories in it");
  // Every checkpoint is checked and named on stdout; the first that is not whole sets the exit
  // code. One that is gone by the time it is read was pruned by a run still writing there.
  Status first;
  int damaged = 0;
  for (const std::string& s : steps) {
    const std::string dir = (std::filesystem::path(a.checkpoint) / s).string();
    const Status st = verify_one(dir);
    if (st.is_ok()) continue;
    if (!std::filesystem::exists(dir, ec)) {
      std::printf("gone %s: removed while verify ran (a run writing this checkpoint.dir keeps only its newest)\n",
                  dir.c_str());
      continue;
    }
    std::printf("damaged %s: %s\n", dir.c_str(), st.message().c_str());
    if (damaged++ == 0) first = st;
  }
  if (damaged == 0) return Status::ok();
  return Status::with_code(first.code(), std::to_string(damaged) + " of " + std::to_string(steps.size()) +
                                             " checkpoints in " + a.checkpoint + " are damaged; the first: " +
                                             first.message());
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check every file of a checkpoint against the sizes and CRC32C in its trainer.json");
  sub->add_option("--checkpoint", a->checkpoint, "Checkpoint directory (or a root with 'latest')")->required();
  sub->add_flag("--all", a->all, "Check every step-NNNNNNNNN checkpoint in the root --checkpoint names");
  sub->callback([a] { report(run_verify_cmd(*a)); });
}

}  // namespace lansbert::cli
