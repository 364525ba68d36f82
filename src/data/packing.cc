// pack_batch: first-fit decreasing over one micro-batch (data/packing.h).
#include "lansbert/data/packing.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "lansbert/core/check.h"

namespace lansbert {

Status packable_sequence(const Batch& b, int row, int* length) {
  const int S = b.seq_len, P = b.max_pred;
  const int32_t* m = b.input_mask.data() + size_t(row) * S;
  int n = 0;
  while (n < S && m[n] == 1) ++n;
  for (int t = n; t < S; ++t)
    if (m[t] != 0)
      return Status::invalid_argument("input_mask is " + std::to_string(m[t]) + " at position " + std::to_string(t) +
                                      ", not ones then zeros: it cannot be packed");
  if (n == 0) return Status::invalid_argument("input_mask holds no token: it cannot be packed");
  for (int k = 0; k < P; ++k) {
    const int32_t at = b.masked_positions[size_t(row) * P + k];
    if (b.masked_ids[size_t(row) * P + k] != Batch::kIgnore && at >= n)
      return Status::invalid_argument("masked slot " + std::to_string(k) + " is at position " + std::to_string(at) +
                                      ", past its " + std::to_string(n) + " tokens: it cannot be packed");
  }
  *length = n;
  return Status::ok();
}

Status packable_sample(const Batch& b, int row, const ShardSet& set, int64_t sample, int* length) {
  const Status st = packable_sequence(b, row, length);
  return st.is_ok() ? st : st.with_prefix("data.packing: " + set.where(sample) + ": ");
}

Status pack_batch(Batch* b) {
  if (b->packed()) return Status::invalid_argument("pack_batch: the batch is packed already");
  std::vector<int> length(b->batch);
  for (int i = 0; i < b->batch; ++i)
    LB_RETURN_IF_ERROR(packable_sequence(*b, i, &length[i]).with_prefix("sequence " + std::to_string(i) + " of the micro-batch: "));
  pack_checked_batch(b, length);
  return Status::ok();
}

void pack_checked_batch(Batch* b, const std::vector<int>& length) {
  LB_CHECK(!b->packed() && length.size() == size_t(b->batch));
  const int B = b->batch, S = b->seq_len;
  std::vector<int> order(B);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return length[x] > length[y]; });
  std::vector<int> used;  // positions taken in each row so far
  std::vector<int> count;  // sequences in each row so far
  std::vector<int32_t> row_of(B), start_of(B), number_of(B);
  for (const int i : order) {
    size_t r = 0;
    while (r < used.size() && used[r] + length[i] > S) ++r;
    if (r == used.size()) {
      used.push_back(0);
      count.push_back(0);
    }
    row_of[i] = int32_t(r);
    start_of[i] = used[r];
    number_of[i] = ++count[r];
    used[r] += length[i];
  }
  const int R = int(used.size());
  std::vector<int32_t> ids(size_t(R) * S, 0), seg(size_t(R) * S, 0), mask(size_t(R) * S, 0);
  for (int i = 0; i < B; ++i) {
    const size_t from = size_t(i) * S, to = size_t(row_of[i]) * S + start_of[i];
    std::copy_n(b->input_ids.begin() + from, length[i], ids.begin() + to);
    std::copy_n(b->segment_ids.begin() + from, length[i], seg.begin() + to);
    std::fill_n(mask.begin() + to, length[i], number_of[i]);
  }
  b->rows = R;
  b->input_ids.swap(ids);
  b->segment_ids.swap(seg);
  b->input_mask.swap(mask);
  b->sequence_row.swap(row_of);
  b->sequence_start.swap(start_of);
}

}  // namespace lansbert
