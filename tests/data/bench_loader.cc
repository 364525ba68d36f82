// bench_loader: micro-batches per second the Loader delivers from our shards, for phase-1
// (seq 128, 20 predictions) and phase-2 (seq 512, 80) shapes, static and dynamic masking.
// Not a test: run by hand, numbers go to docs/performance.md.
//   bench_loader [records_per_shape=65536] [micro_batch=64] [dir=build/bench-shards] [blend]
// With `blend` each shape reads a blend (data.weights) of its shard and a copy of it at
// 0.7 / 0.3, the same samples per batch as the plain run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "lansbert/core/philox.h"
#include "lansbert/data/loader.h"

using namespace lansbert;

namespace {

Status write_synthetic(const std::string& path, int S, int P, int64_t n, bool dynamic) {
  ShardInfo info;
  info.seq_len = S;
  info.max_pred = P;
  info.vocab_size = 30522;
  info.dynamic_masking = dynamic;
  std::unique_ptr<ShardWriter> w;
  LB_RETURN_IF_ERROR(ShardWriter::create(path, info, &w));
  Instance inst;
  for (int64_t i = 0; i < n; ++i) {
    const int len = S - int(philox_bits(RngKey{1, 0, 0}, i) % (S / 4));  // mostly full
    inst.tokens.assign(len, 0);
    for (int t = 0; t < len; ++t) inst.tokens[t] = 1000 + int(philox_bits(RngKey{2, 0, 0}, i * S + t) % 29000);
    inst.tokens[0] = 101;
    inst.a_end = len / 2;
    inst.tokens[inst.a_end] = 102;
    inst.tokens[len - 1] = 102;
    inst.is_random_next = i & 1;
    inst.masked_positions.clear();
    inst.masked_ids.clear();
    if (!dynamic) {
      for (int k = 0; k < P; ++k) {
        inst.masked_positions.push_back(1 + k * 3);
        inst.masked_ids.push_back(inst.tokens[1 + k * 3]);
      }
    }
    LB_RETURN_IF_ERROR(w->add(inst));
  }
  return w->finish();
}

int bench(const std::string& dir, int S, int P, int64_t n, int micro, bool dynamic, bool blend) {
  const std::string path = dir + "/bench-" + std::to_string(S) + (dynamic ? "-dyn" : "") + ".lbs";
  if (!std::filesystem::exists(path)) {
    const Status s = write_synthetic(path, S, P, n, dynamic);
    if (!s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  }
  std::unique_ptr<ShardSet> set;
  LoaderOptions opts;
  Status s;
  if (blend) {
    // A copy, not a link: a blend refuses one file in two sources.
    const std::string copy = path.substr(0, path.size() - 4) + "-copy.lbs";
    if (!std::filesystem::exists(copy)) std::filesystem::copy_file(path, copy);
    s = ShardSet::open_sources({{path}, {copy}}, {}, &set);
    auto schedule = std::make_shared<BlendSchedule>();
    if (s.is_ok()) s = BlendSchedule::create({0.7, 0.3}, "blend", schedule.get());
    opts.blend = std::move(schedule);
  } else {
    s = ShardSet::open({path}, {}, &set);
  }
  if (!s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  opts.micro_batch = micro;
  opts.global_batch = micro * 4;
  std::unique_ptr<Loader> loader;
  s = Loader::create(set.get(), opts, &loader);
  if (!s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  Batch b;
  const int64_t batches = 2 * n / micro;  // two epochs: the second from the page cache
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < batches; ++i) {
    s = loader->next(&b);
    if (!s.is_ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("seq %3d pred %2d micro-batch %3d %-7s%s: %8.0f batches/s  %9.0f samples/s  (%lld batches, %.2f s)\n",
              S, P, micro, dynamic ? "dynamic" : "static", blend ? " blend" : "", batches / sec, batches * micro / sec,
              static_cast<long long>(batches), sec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 65536;
  const int micro = argc > 2 ? std::atoi(argv[2]) : 64;
  const std::string dir = argc > 3 ? argv[3] : std::string(LANSBERT_BINARY_DIR) + "/bench-shards";
  const bool blend = argc > 4 && std::string(argv[4]) == "blend";
  std::filesystem::create_directories(dir);
  int rc = 0;
  for (bool dynamic : {false, true}) {
    rc |= bench(dir, 128, 20, n, micro, dynamic, blend);
    rc |= bench(dir, 512, 80, n / 4, micro / 4 > 0 ? micro / 4 : 1, dynamic, blend);
  }
  return rc;
}
