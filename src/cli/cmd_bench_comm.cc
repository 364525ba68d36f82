// `lansbert bench-comm`: all-reduce bus bandwidth over message sizes for the communicator a
// training run would use (single or MPI on host buffers; with --backend cuda, NCCL on
// device buffers, one GPU per local rank as in training), and a plain MPI_Allreduce loop on
// host buffers as the baseline. Run it under the same mpirun line as training:
//   mpirun -np 16 --hostfile hosts lansbert bench-comm --backend cuda --max-bytes 256M
// --dtype bf16|fp16 times the 16-bit gradient all-reduce (distributed.grad_reduce_dtype).
// Columns as nccl-tests: size, time, algbw = bytes/time, busbw = algbw * 2(n-1)/n.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "lansbert/dist/comm_bench.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/dist/rank_roles.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/rank_agreement.h"

namespace lansbert::cli {

namespace {
struct BenchCommOptions {
  std::string min_bytes = "8", max_bytes = "64M", order = "fast", backend = "cpu", dtype = "fp32";
  int iters = 20, warmup = 5;
  bool baseline = true;
};

bool parse_bytes(const std::string& s, size_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  double mult = 1;
  const std::string suffix(end);
  if (suffix == "K" || suffix == "k") mult = 1024;
  else if (suffix == "M") mult = 1024.0 * 1024;
  else if (suffix == "G") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) return false;
  // At least a byte (0.5 would be 0, and the sizes loop would never end) and at most 1T (the
  // size_t conversion and the x4 steps stay in range).
  if (!(v * mult >= 1 && v * mult <= 1024.0 * 1024 * 1024 * 1024)) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

void print_rows(const char* title, int world, const std::vector<CommBenchRow>& rows) {
  std::printf("# %s, %d rank(s)\n", title, world);
  // One rank reduces nothing: its "bandwidth" is the call's overhead against the size.
  if (world == 1) std::printf("# one rank moves no data: the rates are not a bandwidth (run it under mpirun)\n");
  std::printf("#%13s %12s %10s %10s %6s\n", "size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check");
  for (const CommBenchRow& r : rows)
    std::printf("%14zu %12.1f %10.3f %10.3f %6s\n", r.bytes, r.time_us, r.algbw_gbs, r.busbw_gbs,
                r.correct ? "ok" : "WRONG");
}

int run_bench_comm(const BenchCommOptions& o) {
  size_t lo = 0, hi = 0;
  if (!parse_bytes(o.min_bytes, &lo) || !parse_bytes(o.max_bytes, &hi) || lo > hi) {
    report(Status::invalid_argument("--min-bytes/--max-bytes: expected sizes like 8, 1K, 64M with "
                                    "min <= max, got '" + o.min_bytes + "' and '" + o.max_bytes +
                                    "'"));
    return 2;
  }
  CommOptions copt;
  if (Status s = parse_reduction_order(o.order, &copt.order); !s.is_ok()) {
    report(Status::invalid_argument("--order: " + s.message()));
    return 2;
  }
  GradWire wire;
  if (!parse_grad_wire(o.dtype, &wire)) {
    report(Status::invalid_argument("--dtype: expected fp32, bf16 or fp16, got '" + o.dtype + "'"));
    return 2;
  }
  std::unique_ptr<Communicator> comm = make_communicator(copt);
  // Ranks started with other sizes or counts would wait forever in a collective the others
  // never start: every rank runs rank 0's measurement or the job ends naming the difference.
  const nlohmann::json view = {{"--min-bytes", lo},    {"--max-bytes", hi},       {"--iters", o.iters},
                               {"--warmup", o.warmup}, {"--order", reduction_order_name(copt.order)},
                               {"--backend", o.backend}, {"--dtype", o.dtype}, {"--no-baseline", !o.baseline}};
  if (Status st = check_same_as_rank0(*comm, view, "bench-comm options", "start every rank with the same options");
      !st.is_ok()) {
    report(st);
    return exit_code();
  }
  // --backend cuda: this rank's GPU and the device communicator over it (NCCL), opened as
  // the trainer opens them (collectively: one rank's failure fails all).
  std::unique_ptr<DeviceBackend> device;
  std::unique_ptr<Ops<float>> ops;
  std::unique_ptr<Communicator> device_comm;
  if (o.backend != "cpu") {
    Status st = open_device_backend(o.backend, *comm, &device);
    if (st.is_ok()) {
      ops = device->make_ops(DeviceOptions{});
      st = agree_across_ranks(*comm, device->make_communicator(*comm, *ops, &device_comm),
                              "creating the device communicator");
    }
    if (!st.is_ok()) {
      report(st);
      return exit_code();
    }
  }
  Communicator& bench_comm = device_comm ? *device_comm : *comm;
  std::vector<size_t> sizes;
  for (size_t b = lo; b <= hi; b *= 4) sizes.push_back(b);
  if (sizes.back() != hi) sizes.push_back(hi);  // the largest size asked for is measured too
  const std::vector<CommBenchRow> rows =
      bench_all_reduce(bench_comm, sizes, o.iters, o.warmup, false, device ? &device->allocator() : nullptr, comm.get(),
                       wire);
  bool ok = true;
  for (const CommBenchRow& r : rows) ok = ok && r.correct;
  if (is_writer(*comm)) {
    std::printf("# lansbert bench-comm: communicator %s (%s order), host %s, local ranks %d%s%s\n",
                bench_comm.kind(), device ? "its own" : reduction_order_name(copt.order), comm->hostname().c_str(),
                comm->local_world(), device ? ", device buffers on " : "",
                device ? device->description().c_str() : "");
    print_rows(wire ? (std::string("Communicator::all_reduce_half (") + o.dtype +
                       " wire: sizes in 16-bit values, fp32 in and out, conversions timed)").c_str()
                    : "Communicator::all_reduce (float sum, in place)",
               comm->world(), rows);
  }
  if (o.baseline && std::string(comm->kind()) == "mpi") {
    const std::vector<CommBenchRow> base = bench_all_reduce(*comm, sizes, o.iters, o.warmup, true);
    for (const CommBenchRow& r : base) ok = ok && r.correct;
    if (is_writer(*comm)) print_rows("plain MPI_Allreduce loop (baseline)", comm->world(), base);
  }
  return ok ? 0 : 1;
}
}  // namespace

int run_default_bench_comm() { return run_bench_comm(BenchCommOptions{}); }

void add_bench_comm_command(CLI::App& app) {
  auto o = std::make_shared<BenchCommOptions>();
  CLI::App* sub = app.add_subcommand("bench-comm", "All-reduce bus bandwidth of the communicator");
  sub->add_option("--min-bytes", o->min_bytes, "Smallest message (e.g. 8, 1K)")
      ->capture_default_str();
  sub->add_option("--max-bytes", o->max_bytes,
                  "Largest message (e.g. 64M); sizes step by 4x from --min-bytes and end with this one")
      ->capture_default_str();
  sub->add_option("--iters", o->iters, "Timed iterations per size")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed iterations per size")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--order", o->order,
                  "Reduction order of the host communicator, as distributed.reduction_order: fast (the "
                  "library's algorithm) | fixed (rank order, reproducible); native and fixed_order are "
                  "accepted aliases")
      ->capture_default_str();
  sub->add_option("--backend", o->backend,
                  "cpu: host buffers (MPI); cuda: device buffers and the device communicator (NCCL), one GPU per local rank")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--dtype", o->dtype,
                  "What the gradients travel in (distributed.grad_reduce_dtype): fp32 | bf16 | fp16")
      ->capture_default_str();
  sub->add_flag_callback("--no-baseline", [o] { o->baseline = false; }, "Skip the plain MPI_Allreduce baseline");
  sub->callback([o] { set_exit_code(run_bench_comm(*o)); });
}

}  // namespace lansbert::cli
