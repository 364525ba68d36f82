// GradSync against a plain all-reduce of the whole buffer, exactly, on small-integer data:
// bert-tiny's table with buckets of a few entries, the hook fed in backward's order (heads,
// layers last to first, embeddings) over two micro-steps, for kAvg and kSum; reduced to every
// rank, and to the owner of each shard (ZeRO-1: this rank's slice compared).
#include <vector>

#include "dist_test_util.h"
#include "lansbert/core/check.h"
#include "lansbert/dist/grad_sync.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/bert_config.h"

using namespace lansbert;

int main() {
  std::unique_ptr<Communicator> c = make_mpi_communicator();
  testing::Verdict v(*c);
  BertConfig cfg;
  LB_CHECK(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  const size_t N = table.total_elements();
  for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kSum}) {
    for (size_t bucket_bytes : {size_t(1), size_t(64) << 10, size_t(1) << 30})
    for (bool owners : {false, true}) {
      std::vector<float> grads(N, 0.f), want(N, 0.f);
      GradSync sync(table, grads.data(), *c, {bucket_bytes, op, std::nullopt, owners});
      // Two micro-steps; the hook only reduces on the second.
      for (int micro = 0; micro < 2; ++micro) {
        sync.begin(micro == 1);
        for (const ParamEntry& e : table.entries()) {
          for (size_t i = 0; i < e.numel; ++i) {
            const float g = float((c->rank() + 1) * int((e.offset + i + micro) % 5) * c->world());
            grads[e.offset + i] += g;
            want[e.offset + i] += g;
          }
        }
        // Backward's order, coarsely: from the last entry down in groups of three.
        if (micro == 1) {
          for (size_t end = table.size(); end > 0;) {
            const size_t first = end >= 3 ? end - 3 : 0;
            sync.on_ready(first, end);
            end = first;
          }
        }
      }
      sync.finish();
      c->all_reduce(want.data(), N, op);
      // To owners (ZeRO-1): only this rank's shard is reduced here.
      size_t lo = 0, hi = N;
      if (owners) ShardedStep::shard_range(N, c->world(), c->rank(), &lo, &hi);
      size_t bad = 0;
      for (size_t i = lo; i < hi; ++i) bad += grads[i] != want[i];
      v.expect(bad == 0, std::string(owners ? "bucketed to owners" : "bucketed") + " != plain all-reduce, " +
                             std::to_string(bad) + " elements, " + std::to_string(sync.buckets().size()) + " buckets");
      // The buckets tile the buffer.
      size_t covered = 0;
      for (const GradBucket& b : sync.buckets()) covered += b.end - b.begin;
      v.expect(covered == N, "buckets do not tile the buffer");
    }
  }
  return v.finish("grad_sync");
}
