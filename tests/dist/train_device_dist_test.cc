// The trainer's multi-rank device path (backend: cuda, world > 1) on the CPU, with a fake
// device: the host stand-in of tests/train (host memory, CPU ops), registered as "cuda",
// whose make_communicator returns a recording wrapper around an MPI communicator in place
// of NCCL.
// Checks, on 1 and 2 ranks under mpirun:
//   - each rank binds the device of its local rank, and only a multi-rank run makes a device
//     communicator, from the model's own ops;
//   - replicated: every gradient bucket is reduced asynchronously over the device
//     communicator (the whole buffer once per step); sharded (ZeRO-1): the reduce-scatter and
//     all-gather run on it, the optimizer's norm sums on the host communicator; no host
//     scalar (double) travels on it either way, as NCCL could not take host pointers;
//   - the parameters equal those of the CPU backend's run, replicated and sharded, fp32 and
//     fp16 with loss scaling (same ops, same reductions: exact);
//   - one visible device per rank is bound as device 0 (a scheduler's per-rank GPU);
//   - refusals are clear and collective: fixed reduction order on more than one rank, and a
//     device failing on one rank only (the other rank fails too, saying so, instead of
//     waiting in a collective). More ranks than visible devices: device_ranks_test.cc.
// Usage: mpirun -np N train_device_dist_test SCRATCH_DIR
#include <filesystem>
#include <vector>

#include "dist_test_util.h"
#include "host_device_backend.h"
#include "lansbert/core/check.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/trainer.h"
#include "train_test_util.h"

using namespace lansbert;

namespace {

// What the fake device saw; reset before each run.
struct FakeLog {
  int visible = 8;         // devices the fake reports
  int fail_index = -1;     // use_device(fail_index) fails
  int bound = -1;          // use_device's index
  int communicators = 0;   // make_communicator calls
  bool foreign_ops = false;  // synchronize_compute/make_communicator got ops the fake did not make
  size_t async_elements = 0, async_calls = 0, blocking_float_calls = 0;
  size_t half_calls = 0;  // collectives on the 16-bit wire (also counted above)
} g_log;

// Stands in for NCCL: forwards to MPI, counts, and refuses host scalars.
class RecordingCommunicator final : public Communicator {
 public:
  explicit RecordingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int world() const override { return inner_->world(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_world() const override { return inner_->local_world(); }
  std::string hostname() const override { return inner_->hostname(); }
  const char* kind() const override { return "fake-device"; }
  void all_reduce(float* d, size_t n, ReduceOp op) override {
    ++g_log.blocking_float_calls;
    inner_->all_reduce(d, n, op);
  }
  void all_reduce(double*, size_t, ReduceOp) override {
    LB_CHECK_MSG(false, "a host scalar (double) all-reduce reached the device communicator");
  }
  void reduce_scatter(const float* s, float* r, size_t n, ReduceOp op) override {
    ++g_log.blocking_float_calls;
    inner_->reduce_scatter(s, r, n, op);
  }
  void all_gather(const float* s, float* r, size_t n) override {
    ++g_log.blocking_float_calls;
    inner_->all_gather(s, r, n);
  }
  void broadcast(void* d, size_t b, int root) override { inner_->broadcast(d, b, root); }
  void barrier() override { inner_->barrier(); }
  void all_reduce_async(float* d, size_t n, ReduceOp op) override {
    ++g_log.async_calls;
    g_log.async_elements += n;
    inner_->all_reduce_async(d, n, op);
  }
  void all_reduce_half_async(float* d, uint16_t* w, size_t n, ReduceOp op, kern::HalfFormat f) override {
    ++g_log.async_calls;
    ++g_log.half_calls;
    g_log.async_elements += n;
    inner_->all_reduce_half_async(d, w, n, op, f);
  }
  void reduce_async(float* d, size_t n, ReduceOp op, int root) override {
    ++g_log.async_calls;
    g_log.async_elements += n;
    inner_->reduce_async(d, n, op, root);
  }
  void reduce_half_async(float* d, uint16_t* w, size_t n, ReduceOp op, int root, kern::HalfFormat f) override {
    ++g_log.async_calls;
    ++g_log.half_calls;
    g_log.async_elements += n;
    inner_->reduce_half_async(d, w, n, op, root, f);
  }
  void reduce_scatter_half(const float* s, uint16_t* w, float* r, size_t n, ReduceOp op,
                           kern::HalfFormat f) override {
    ++g_log.blocking_float_calls;
    ++g_log.half_calls;
    inner_->reduce_scatter_half(s, w, r, n, op, f);
  }
  void progress() override { inner_->progress(); }
  void wait_all() override { inner_->wait_all(); }

 private:
  std::unique_ptr<Communicator> inner_;
};

// The one-rank host stand-in (tests/train/host_device_backend.h) plus what several ranks
// need: device choice by local rank (with a configurable count and a failing index) and a
// device communicator.
class FakeDevice final : public DeviceBackend {
 public:
  std::string description() const override { return "fake device " + std::to_string(g_log.bound); }
  int visible_devices() const override { return g_log.visible; }
  Status use_device(int index) override {
    if (index == g_log.fail_index) return Status::unsupported("fake device " + std::to_string(index) + " is broken");
    g_log.bound = index;
    return Status::ok();
  }
  Allocator& allocator() override { return host_.allocator(); }
  std::unique_ptr<Ops<float>> make_ops(const DeviceOptions& options) override {
    auto ops = host_.make_ops(options);
    made_ = ops.get();
    return ops;
  }
  void synchronize_compute(Ops<float>& ops) override { g_log.foreign_ops |= &ops != made_; }
  Status make_communicator(Communicator&, Ops<float>& ops, std::unique_ptr<Communicator>* out) override {
    ++g_log.communicators;
    g_log.foreign_ops |= &ops != made_;
    *out = std::make_unique<RecordingCommunicator>(make_mpi_communicator());
    return Status::ok();
  }
  Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                        std::unique_ptr<Optimizer>* out) override {
    return host_.make_optimizer(name, config, out);
  }
  GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale, size_t begin,
                              size_t end) override {
    return host_.unscale_and_check(table, grads, scale, begin, end);
  }
  double gradient_sum_squares(const ParamTable& table, const float* grads) override {
    return host_.gradient_sum_squares(table, grads);
  }

 private:
  testing::HostDeviceBackend host_;
  Ops<float>* made_ = nullptr;
};

Status train(Communicator& comm, const TrainConfig& c, TrainResult* r, int64_t stop_at = -1,
             const std::string& resume = "") {
  g_log.bound = -1;
  g_log.communicators = 0;
  g_log.foreign_ops = false;
  g_log.async_elements = g_log.async_calls = g_log.blocking_float_calls = g_log.half_calls = 0;
  std::string key;
  Status st = c.validate(comm.world(), &key);
  LB_CHECK_MSG(st.is_ok(), key + ": " + st.to_string());
  TrainOptions o;
  o.log = nullptr;
  o.handle_signals = false;
  o.stop_at_step = stop_at;
  o.resume = resume;
  return run_training(c, comm, o, r);
}

std::vector<float> final_params(const TrainConfig& c, const std::string& checkpoint) {
  BertConfig mc;
  LB_CHECK(c.resolve_model(&mc).is_ok());
  const ParamTable table = make_bert_param_table(mc);
  std::vector<float> p(table.total_elements());
  CheckpointMeta meta;
  Status st = read_checkpoint_meta(checkpoint, &meta);
  if (st.is_ok()) st = load_checkpoint_params(checkpoint, meta, table, p.data());
  LB_CHECK_MSG(st.is_ok(), st.to_string());
  return p;
}

bool contains(const Status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

}  // namespace

int main(int argc, char** argv) {
  LB_CHECK_MSG(argc == 2, "usage: train_device_dist_test SCRATCH_DIR");
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  Communicator& c = *comm;
  testing::Verdict v(c);
  const int W = c.world();
  const std::string dir = std::string(argv[1]) + "/np" + std::to_string(W);
  if (c.rank() == 0) {
    std::filesystem::remove_all(dir);
    LB_CHECK(!testing::write_tiny_shards(dir + "/data").empty());
  }
  c.barrier();
  register_device_backend("cuda", [](std::unique_ptr<DeviceBackend>* out) {
    *out = std::make_unique<FakeDevice>();
    return Status::ok();
  });

  // 4 steps, 32 sequences in micro-batches of 8: 4 micro-steps on 1 rank, 2 on 2.
  TrainConfig cfg = testing::tiny_config(dir + "/data", dir + "/cpu", 4);
  cfg.batch.micro_batch = 8;
  cfg.distributed.bucket_mb = 0.05;  // several buckets
  BertConfig mc;
  LB_CHECK(cfg.resolve_model(&mc).is_ok());
  const size_t n = make_bert_param_table(mc).total_elements();
  TrainResult r_dev;
  // fp16: dynamic loss scaling over ranks (the scaled gradients are averaged; every rank
  // unscales and takes the same skip verdict). wire: distributed.grad_reduce_dtype.
  struct Mode {
    bool sharded;
    const char *dtype, *wire;
  };
  for (auto [sharded, dtype, wire] : {Mode{false, "fp32", "fp32"}, Mode{true, "fp32", "fp32"}, Mode{true, "fp16", "fp32"},
                                      Mode{false, "bf16", "bf16"}, Mode{true, "fp16", "fp16"}}) {
    const std::string mode = std::string(sharded ? "sharded" : "replicated") + "-" + dtype + "-wire-" + wire;
    TrainConfig host = cfg;
    host.distributed.shard_optimizer = sharded;
    host.distributed.grad_reduce_dtype = wire;
    host.precision.dtype = dtype;
    host.checkpoint.dir = dir + "/cpu-" + mode;
    TrainResult r_cpu;
    Status st = train(c, host, &r_cpu);
    v.expect(st.is_ok(), mode + " cpu run: " + st.to_string());
    v.expect(g_log.bound == -1 && g_log.communicators == 0, "the cpu run touched the device");

    TrainConfig dev = host;
    dev.backend = "cuda";
    dev.checkpoint.dir = dir + "/dev-" + mode;
    st = train(c, dev, &r_dev);
    v.expect(st.is_ok(), mode + " device run: " + st.to_string());
    v.expect(g_log.bound == c.local_rank(), "bound device " + std::to_string(g_log.bound) + ", local rank " +
                                                std::to_string(c.local_rank()));
    const FakeLog seen = g_log;  // the stop/resume runs below reset it
    v.expect(!g_log.foreign_ops, "the trainer passed ops the device did not make");
    v.expect(g_log.communicators == (W > 1 ? 1 : 0), "device communicators made: " + std::to_string(g_log.communicators));
    // Every gradient element is reduced once a step, in several buckets started from the
    // backward hook: all-reduces when replicated, reductions to the owning rank when sharded.
    if (W > 1) {
      v.expect(g_log.async_elements == 4 * n, mode + ": device communicator reduced " +
                                                  std::to_string(g_log.async_elements) +
                                                  " gradient elements in 4 steps of " + std::to_string(n));
      v.expect(g_log.async_calls > 4, mode + ": expected several buckets per step, got " +
                                          std::to_string(g_log.async_calls) + " reductions in 4 steps");
    }
    const bool half_wire = std::string(wire) != "fp32";
    v.expect((g_log.half_calls > 0) == (W > 1 && half_wire),
             mode + ": " + std::to_string(g_log.half_calls) + " collectives on the 16-bit wire");
    // Blocking collectives: none when replicated; when sharded, the all-gather of each applied
    // step (an fp16 wire may skip a step: the first loss scale overflows the fp16 sum).
    if (W > 1)
      v.expect(sharded ? g_log.blocking_float_calls >= 3 && g_log.blocking_float_calls <= 4
                       : g_log.blocking_float_calls == 0,
               mode + ": " + std::to_string(g_log.blocking_float_calls) +
                   " blocking collectives on the device communicator in 4 steps");
    if (st.is_ok() && r_cpu.step == 4) {
      const std::vector<float> a = final_params(host, r_cpu.checkpoint), b = final_params(dev, r_dev.checkpoint);
      size_t differ = 0;
      for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
      v.expect(differ == 0, mode + " device-path parameters differ from the cpu run in " + std::to_string(differ) +
                                " elements");
      v.expect(r_dev.loss == r_cpu.loss, mode + " device-path loss differs from the cpu run");
      // Stopped after step 2 and resumed: the moments come back through host staging (this
      // rank's slice when sharded) and the run ends where the straight one did.
      TrainConfig part = dev;
      part.checkpoint.dir = dir + "/part-" + mode;
      TrainResult r_part;
      st = train(c, part, &r_part, 2);
      if (st.is_ok()) st = train(c, part, &r_part, -1, "latest");
      v.expect(st.is_ok() && r_part.step == 4, mode + " device stop/resume: " + st.to_string());
      if (st.is_ok()) {
        const std::vector<float> d = final_params(part, r_part.checkpoint);
        size_t resumed_differ = 0;
        for (size_t i = 0; i < d.size(); ++i) resumed_differ += d[i] != b[i];
        v.expect(resumed_differ == 0, mode + " device stop/resume differs from the straight run");
      }
      if (c.rank() == 0)
        std::printf("fake device, %s, %d rank(s): %zu asynchronous and %zu blocking collectives on the device "
                    "communicator; parameters %s the cpu run's\n", mode.c_str(), W, seen.async_calls,
                    seen.blocking_float_calls, differ == 0 ? "equal to" : "DIFFERENT from");
    }
  }

  // Refusals. Fixed order: only on more than one rank.
  Status st;
  TrainConfig bad = cfg;
  bad.backend = "cuda";
  bad.distributed.reduction_order = "fixed";
  bad.checkpoint.dir = dir + (W > 1 ? "/refused" : "/fixed");
  st = train(c, bad, &r_dev);
  bad.checkpoint.dir = dir + "/refused";
  if (W > 1)
    v.expect(st.code() == StatusCode::kUnsupported && contains(st, "distributed.reduction_order"),
             "fixed-order device run: " + st.to_string());
  else
    v.expect(st.is_ok(), "fixed-order device run on one rank: " + st.to_string());
  bad.distributed.reduction_order = "fast";
  // No device; or, on several ranks, one visible device each: a scheduler's per-rank GPU
  // (srun --gpus-per-task=1), bound as device 0.
  g_log.visible = W - 1;
  bad.checkpoint.dir = dir + (W > 1 ? "/one-visible" : "/refused");
  st = train(c, bad, &r_dev);
  bad.checkpoint.dir = dir + "/refused";
  if (W == 1)
    v.expect(!st.is_ok() && contains(st, "no device"), "no device: " + st.to_string());
  else
    v.expect(st.is_ok() && g_log.bound == 0, "one visible device per rank: " + st.to_string() + ", bound " +
                                                 std::to_string(g_log.bound));
  g_log.visible = 8;
  // One rank's device fails: every rank fails, the others saying another rank failed.
  if (W > 1) {
    g_log.fail_index = 1;
    st = train(c, bad, &r_dev);
    const bool broken = c.local_rank() == 1;
    v.expect(!st.is_ok() && contains(st, broken ? "is broken" : "failed on another rank"),
             "one broken device: " + st.to_string());
    g_log.fail_index = -1;
  }
  v.expect(!std::filesystem::exists(dir + "/refused/latest"), "a refused run wrote a checkpoint");
  return v.finish("trainer device path (fake device)");
}
