// `lansbert convert`: NVIDIA DeepLearningExamples' HDF5 shards to lansbert shards
// (data/hdf5_convert.h), for runs that would otherwise hold every decoded HDF5 file in memory.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "lansbert/core/byte_text.h"
#include "lansbert/core/stop_signals.h"
#include "lansbert/data/hdf5_convert.h"
#include "lansbert/data/vocab.h"

namespace lansbert::cli {
namespace {

struct ConvertArgs {
  std::string vocab;
  std::vector<std::string> inputs;
  std::string out;
  bool quiet = false;
};

Status run_convert(const ConvertArgs& a) {
  Vocab vocab;
  LB_RETURN_IF_ERROR(Vocab::load(a.vocab, &vocab));
  Hdf5ConvertOptions o;
  o.inputs = a.inputs;
  o.out_dir = a.out;
  o.vocab = shard_info_of(vocab);
  o.vocab_path = a.vocab;
  // Ctrl-C, SIGTERM or SIGUSR1 ends it between samples with --out as it was.
  const StopSignals stop_guard;
  o.stop = stop_signal;
  if (!a.quiet)
    o.on_file = [](const std::string& from, const std::string& to, int64_t n) {
      std::fprintf(stderr, "convert: %s: %lld samples, staged as %s\n", from.c_str(), (long long)n,
                   std::filesystem::path(to).filename().c_str());
    };
  Hdf5ConvertStats st;
  LB_RETURN_IF_ERROR(convert_hdf5_shards(o, &st));
  std::printf("convert: %lld HDF5 files, %lld samples -> %lld shards (%s) under %s, vocabulary %s (hash %s)\n",
              (long long)st.files, (long long)st.samples, (long long)st.files, byte_text(st.bytes_written).c_str(),
              a.out.c_str(), a.vocab.c_str(), vocab_hash_text(vocab.hash()).c_str());
  return Status::ok();
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Rewrite NVIDIA DeepLearningExamples HDF5 pretraining shards as lansbert shards (one per file, the "
                 "same samples), read through mmap instead of decoded into memory");
  sub->add_option("--vocab", args->vocab, "The WordPiece vocab.txt the shards' ids mean (recorded in each shard)")
      ->required();
  sub->add_option("--input", args->inputs, "HDF5 files, globs or directories")->required();
  sub->add_option("--out", args->out, "Output directory (shard-NNNNN.lbs; earlier shard-*.lbs there are replaced)")
      ->required();
  sub->add_flag("--quiet", args->quiet, "No line per file on stderr");
  sub->callback([args] {
    const Status s = run_convert(*args);
    if (!s.is_ok()) report(s);
    if (s.code() == StatusCode::kInterrupted) set_exit_code(128 + stop_signal());  // as the shell would
  });
}

}  // namespace lansbert::cli
