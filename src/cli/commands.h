// The subcommands of the lansbert program. Each lives in its own cmd_<name>.cc and registers
// itself on the CLI11 app; its callback runs the command and records the exit code.
#pragma once

#include <CLI/CLI.hpp>

#include "lansbert/core/status.h"

namespace lansbert::cli {

void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_vocab_command(CLI::App& app);
void add_prep_command(CLI::App& app);
void add_convert_command(CLI::App& app);  // cmd_convert.cc
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_verify_command(CLI::App& app);  // cmd_verify.cc
void add_show_command(CLI::App& app);    // cmd_show.cc
void add_bench_comm_command(CLI::App& app);  // cmd_bench_comm.cc
// `lansbert bench --comm`: the bench-comm sweep with its default sizes.
int run_default_bench_comm();


// Records the process exit code of the command that ran (last write wins).
void set_exit_code(int code);
int exit_code();
// Prints "lansbert: error: <status>" to stderr and records its exit code.
void report(const Status& s);

}  // namespace lansbert::cli
