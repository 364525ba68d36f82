// The lansbert program: one binary, one subcommand per job (README.md "What a user runs").
// Parsing errors exit 2 with CLI11's message naming the flag; command failures exit with
// the code their Status maps to.
#include <cstdio>
#include <string>

#include "commands.h"
#include "lansbert/core/check.h"
#include "lansbert/core/stop_signals.h"
#include "lansbert/dist/mpi_session.h"
#ifdef LANSBERT_HAVE_CUDA
#include "cuda_device_backend.h"  // the train layer's DeviceBackend, filled in with CUDA
#endif

namespace lansbert::cli {
namespace {
int g_exit_code = 0;
}
void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }
void report(const Status& s) {
  if (s.is_ok()) return;
  std::fprintf(stderr, "lansbert: error: %s\n", s.to_string().c_str());
  set_exit_code(s.exit_code());
}

namespace {
// The commands that are one process each. A launcher that starts several copies (mpirun -np
// N, srun in a step of N tasks) would have them write the same output or share one device:
// why, for the message that refuses it; null for the commands that run on many ranks.
const char* why_one_process(CLI::App& app) {
  if (app.got_subcommand("prep"))
    return "the copies would write the same --out directory (prep uses this host's cores itself: --threads)";
  if (app.got_subcommand("vocab")) return "the copies would write the same --out file";
  if (app.got_subcommand("convert")) return "the copies would write the same --out directory";
  if (app.got_subcommand("export")) return "the copies would write the same --out directory";
  if (app.got_subcommand("tokenize")) return "the copies would each write the whole output";
  if (app.got_subcommand("show")) return "the copies would each print the same sequences";
  if (app.got_subcommand("verify"))
    return "the copies would each read the whole checkpoint (node-local checkpoint directories: one copy per host)";
  if (app.got_subcommand("bench") && app.get_subcommand("bench")->count("--comm") == 0)
    return "the copies would share device 0 or this host's cores, and each measure less than it would alone (bench "
           "--comm and bench-comm are the measurements across ranks)";
  return nullptr;
}

// LANSBERT_COMM=single says each copy is meant to run on its own (a script that srun starts
// once per task, each copy with its own --input and --out).
Status check_started_once(CLI::App& app) {
  const char* why = why_one_process(app);
  if (!why) return Status::ok();
  std::string from;
  const int copies = launcher_world_size(&from);
  if (copies <= 1) return Status::ok();
  CommChoice choice;
  LB_RETURN_IF_ERROR(comm_choice_from_env(&choice));
  if (choice == CommChoice::kSingle) return Status::ok();
  return Status::invalid_argument("lansbert " + app.get_subcommands().front()->get_name() +
                                  " runs as one process, but the launcher started " + std::to_string(copies) + " (" +
                                  from + "): " + why + "; run it once, without mpirun or srun (or with srun -n 1), or "
                                  "set LANSBERT_COMM=single where each copy writes its own output");
}
}  // namespace
}  // namespace lansbert::cli

int main(int argc, char** argv) {
  lansbert::restore_default_signal_actions();  // before any thread exists (stop_signals.h)
  lansbert::ignore_file_size_signal();
  lansbert::install_uncaught_exception_handler();
#ifdef LANSBERT_HAVE_CUDA
  lansbert::register_device_backend("cuda", lansbert::cuda::make_device_backend);
#endif
  CLI::App app{"lansbert " LANSBERT_VERSION ": BERT pretraining with LANS and LAMB"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lansbert " LANSBERT_VERSION);
  lansbert::cli::add_info_command(app);
  lansbert::cli::add_bench_command(app);
  lansbert::cli::add_tokenize_command(app);
  lansbert::cli::add_vocab_command(app);
  lansbert::cli::add_prep_command(app);
  lansbert::cli::add_convert_command(app);
  lansbert::cli::add_train_command(app);
  lansbert::cli::add_eval_command(app);
  lansbert::cli::add_export_command(app);
  lansbert::cli::add_verify_command(app);
  lansbert::cli::add_show_command(app);
  lansbert::cli::add_bench_comm_command(app);
  // LANSBERT_COMM picks the communicator of train, eval, bench-comm and bench --comm. A misspelt
  // value is refused once the command line is parsed (so --help still works) and before the
  // command runs: a job then fails before it loads its config or waits for other ranks. Only
  // the commands that may make a communicator look at it (bench: with or without --comm).
  // A command that is one process, started as several, is refused here too.
  app.parse_complete_callback([&app] {
    auto refuse = [](const lansbert::Status& st) {
      lansbert::cli::report(st);
      throw CLI::RuntimeError(lansbert::cli::exit_code());  // exits quietly with that code
    };
    if (lansbert::Status st = lansbert::cli::check_started_once(app); !st.is_ok()) refuse(st);
    if (!app.got_subcommand("train") && !app.got_subcommand("bench-comm") && !app.got_subcommand("bench") &&
        !app.got_subcommand("eval"))
      return;
    lansbert::CommChoice choice;
    if (lansbert::Status st = lansbert::comm_choice_from_env(&choice); !st.is_ok()) refuse(st);
  });

  // CLI11 reports a misspelt command as a missing one: name it, and the commands there are.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "lansbert: error: unknown command '%s' (commands: %s; see lansbert --help)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return lansbert::cli::exit_code();
}
