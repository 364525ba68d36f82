// The 16-bit gradient wire (distributed.grad_reduce_dtype: bf16 | fp16) over MPI, in both
// reduction orders and both formats. Run under mpirun -np 1..4.
//  - Collectives on small-integer data, which bf16 and fp16 hold exactly (as do all their
//    partial sums here), equal the exact sum or average for sizes 0..67 and a few larger
//    ones, including sizes not divisible by the rank count; two all-reduces in flight.
//  - The wire really is 16 bits: 1 + 2^-12 is not a bf16 or fp16 value, so with more than
//    one rank its sum comes back as exactly world (fp32 would keep the 2^-12s); with one
//    rank nothing travels and the value is untouched.
//  - GradSync and ShardedStep with the wire give, on small-integer gradients, exactly what
//    their fp32 reductions give.
//  - An fp16 sum beyond fp16's range is infinity, an average within it is not.
//  - With one rank nothing touches the buffers (a one-rank device run passes device
//    pointers): a page this process cannot read stands in for them.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <vector>

#include "dist_test_util.h"
#include "lansbert/core/check.h"
#include "lansbert/dist/grad_sync.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/bert_config.h"

using namespace lansbert;

namespace {

using kern::HalfFormat;

double val(int r, size_t i) { return double((r + 1) * int(i % 7 + 1) - 3); }

std::string name(const char* what, HalfFormat f, size_t n) {
  return std::string(what) + (f == HalfFormat::kBf16 ? " bf16" : " fp16") + " n=" + std::to_string(n);
}

void check_all_reduce(Communicator& c, testing::Verdict& v, size_t n, HalfFormat f) {
  const int W = c.world();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    const double k = op == ReduceOp::kAvg ? W : 1;
    std::vector<float> a(n), b(n);
    std::vector<uint16_t> wa(n), wb(n);
    for (size_t i = 0; i < n; ++i) a[i] = b[i] = float(val(c.rank(), i) * k);
    c.all_reduce_half_async(a.data(), wa.data(), n, op, f);
    c.all_reduce_half_async(b.data(), wb.data(), n, op, f);
    c.progress();
    c.wait_all();
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int r = 0; r < W; ++r) want += val(r, i) * k;
      want /= k;
      if (!v.expect(a[i] == want && b[i] == want, name("all_reduce_half", f, n))) return;
    }
  }
}

void check_reduce_scatter(Communicator& c, testing::Verdict& v, size_t n, HalfFormat f) {
  const int W = c.world(), R = c.rank();
  std::vector<float> send(n * W), recv(n, -99.f);
  std::vector<uint16_t> wire(n * W);
  for (size_t i = 0; i < n * W; ++i) send[i] = float(val(R, i) * W);
  c.reduce_scatter_half(send.data(), wire.data(), recv.data(), n, ReduceOp::kAvg, f);
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < W; ++r) want += val(r, R * n + i);
    if (!v.expect(recv[i] == want, name("reduce_scatter_half", f, n))) return;
  }
}

void check_rounds(Communicator& c, testing::Verdict& v, HalfFormat f) {
  const float x = 1.f + 1.f / 4096.f;  // between 1 and the next bf16 and fp16 value
  std::vector<float> a(5, x);
  std::vector<uint16_t> w(5);
  c.all_reduce_half(a.data(), w.data(), a.size(), ReduceOp::kSum, f);
  const float want = c.world() == 1 ? x : float(c.world());
  for (float y : a) v.expect(y == want, name("the wire rounds", f, a.size()) + ": got " + std::to_string(y));
}

// Every rank sends 4e4, which fits fp16. Their sum (beyond 65504) comes back as infinity,
// never a clamped finite value, so the loss scaler skips the step and backs off; their
// average does not overflow, because each rank scales by 1/world before the rounding.
void check_fp16_overflow(Communicator& c, testing::Verdict& v) {
  if (c.world() == 1) return;
  std::vector<uint16_t> w(3);
  std::vector<float> sum(3, 4e4f), avg(3, 4e4f);
  c.all_reduce_half(sum.data(), w.data(), sum.size(), ReduceOp::kSum, HalfFormat::kFp16);
  for (float y : sum) v.expect(std::isinf(y) && y > 0, "fp16 sum beyond 65504: got " + std::to_string(y));
  c.all_reduce_half(avg.data(), w.data(), avg.size(), ReduceOp::kAvg, HalfFormat::kFp16);
  for (float y : avg)  // fp16's spacing is 32 at 4e4; the 1/world roundings add a little
    v.expect(std::fabs(y - 4e4f) <= 64.f, "fp16 average of 4e4: got " + std::to_string(y));
}

// GradSync on bert-tiny's table with buckets of a few entries; ShardedStep's gradient slice.
void check_grad_sync_and_sharded(Communicator& c, testing::Verdict& v, HalfFormat f) {
  BertConfig cfg;
  LB_CHECK(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  const size_t N = table.total_elements();
  const int W = c.world();
  std::vector<float> g(N, 0.f);
  for (const ParamEntry& e : table.entries())
    for (size_t i = 0; i < e.numel; ++i) g[e.offset + i] = float((c.rank() + 1) * int((e.offset + i) % 5) * W);
  std::vector<float> want = g;
  c.all_reduce(want.data(), N, ReduceOp::kAvg);
  size_t bad = 0;
  for (bool owners : {false, true}) {  // to every rank; to the owner of each shard only
    std::vector<float> got = g;
    GradSync sync(table, got.data(), c, {size_t(64) << 10, ReduceOp::kAvg, f, owners});
    sync.begin(true);
    for (size_t end = table.size(); end > 0;) {  // backward's order, in groups of three
      const size_t first = end >= 3 ? end - 3 : 0;
      sync.on_ready(first, end);
      end = first;
    }
    sync.finish();
    size_t lo = 0, hi = N;
    if (owners) ShardedStep::shard_range(N, W, c.rank(), &lo, &hi);
    bad = 0;
    for (size_t i = lo; i < hi; ++i) bad += got[i] != want[i];
    v.expect(bad == 0, name(owners ? "GradSync to owners" : "GradSync", f, N) + ": " + std::to_string(bad) +
                           " elements differ");
  }

  // ShardedStep: the gradients it leaves on this rank's slice are the averaged ones (the
  // update itself is checked against fp32 in dist_model_test).
  UpdaterConfig ucfg;
  ucfg.optimizer.name = "lamb";
  ucfg.schedule.kind = ScheduleKind::kConstant;
  ucfg.schedule.peak_lr = 0.01;
  std::unique_ptr<Updater> upd;
  LB_CHECK(Updater::create(ucfg, &upd).is_ok());
  ShardedStep step(table, c, c, *upd, host_allocator(), f);
  std::vector<float> p(N, 0.5f), m(step.shard_elements(), 0.f), vv(step.shard_elements(), 0.f);
  std::vector<float> gs = g;
  StepReport rep;
  v.expect(step.step(p.data(), gs.data(), m.data(), vv.data(), &rep).is_ok(), "sharded step");
  bad = 0;
  for (size_t i = step.shard_begin(); i < step.shard_end(); ++i) bad += gs[i] != want[i];
  v.expect(bad == 0, name("ShardedStep", f, N) + ": " + std::to_string(bad) + " slice elements differ");
}

void check_untouched_on_one_rank(Communicator& c, testing::Verdict& v) {
  if (c.world() != 1) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!v.expect(p != MAP_FAILED, "mmap")) return;
  float* data = static_cast<float*>(p);
  uint16_t* wire = reinterpret_cast<uint16_t*>(static_cast<char*>(p) + page);
  for (HalfFormat f : {HalfFormat::kBf16, HalfFormat::kFp16}) {
    c.all_reduce_half_async(data, wire, page / sizeof(float), ReduceOp::kAvg, f);
    c.wait_all();
  }
  munmap(p, 2 * page);
}

}  // namespace

int main() {
  return testing::for_each_reduction_order("16-bit wire", [](Communicator& c, testing::Verdict& v, const char*) {
    const std::vector<size_t> sizes = testing::collective_test_sizes();
    for (HalfFormat f : {HalfFormat::kBf16, HalfFormat::kFp16}) {
      for (size_t n : sizes) {
        check_all_reduce(c, v, n, f);
        check_reduce_scatter(c, v, n, f);
      }
      check_rounds(c, v, f);
      check_grad_sync_and_sharded(c, v, f);
    }
    check_fp16_overflow(c, v);
    check_untouched_on_one_rank(c, v);
  });
}
