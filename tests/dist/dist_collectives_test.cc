// Every collective of the MPI communicator, in both reduction orders, on small-integer data
// (every sum exact in any order, so results are compared exactly), for sizes 0..67 and a few
// larger ones, including sizes not divisible by the rank count. Run under mpirun -np 1..4.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "dist_test_util.h"
#include "lansbert/dist/mpi_session.h"

using namespace lansbert;

namespace {

// Small integers: value of element i on rank r.
double val(int r, size_t i) { return double((r + 1) * int(i % 7 + 1) - 3); }

template <typename T>
void check_all_reduce(Communicator& c, testing::Verdict& v, size_t n, ReduceOp op,
                      const char* tag) {
  const int W = c.world();
  std::vector<T> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = T(val(c.rank(), i) * (op == ReduceOp::kAvg ? W : 1));
  c.all_reduce(x.data(), n, op);
  for (size_t i = 0; i < n; ++i) {
    double want = op == ReduceOp::kMax ? -1e300 : 0;
    for (int r = 0; r < W; ++r) {
      const double y = val(r, i) * (op == ReduceOp::kAvg ? W : 1);
      want = op == ReduceOp::kMax ? std::max(want, y) : want + y;
    }
    if (op == ReduceOp::kAvg) want /= W;
    if (!v.expect(double(x[i]) == want, std::string(tag) + " all_reduce n=" + std::to_string(n) +
                                            " i=" + std::to_string(i)))
      return;
  }
}

void check_scatter_gather(Communicator& c, testing::Verdict& v, size_t n, const char* tag) {
  const int W = c.world(), R = c.rank();
  std::vector<float> send(n * W), recv(n, -99.f);
  for (size_t i = 0; i < n * W; ++i) send[i] = float(val(R, i));
  c.reduce_scatter(send.data(), recv.data(), n, ReduceOp::kSum);
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < W; ++r) want += val(r, R * n + i);
    if (!v.expect(recv[i] == want, std::string(tag) + " reduce_scatter n=" + std::to_string(n)))
      break;
  }
  std::vector<float> all(n * W, -99.f), mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = float(val(R, i));
  c.all_gather(mine.data(), all.data(), n);
  // In place: this rank's block already sits at all + R*n.
  std::vector<float> inplace(n * W, -99.f);
  std::memcpy(inplace.data() + R * n, mine.data(), n * sizeof(float));
  c.all_gather(inplace.data() + R * n, inplace.data(), n);
  for (int r = 0; r < W; ++r) {
    for (size_t i = 0; i < n; ++i) {
      v.expect(all[r * n + i] == float(val(r, i)), std::string(tag) + " all_gather");
      v.expect(inplace[r * n + i] == float(val(r, i)), std::string(tag) + " all_gather in place");
    }
  }
}

// Reductions to each root in turn, several in flight (sum and average): the root holds the
// exact result; the other ranks' buffers are not looked at.
void check_reduce(Communicator& c, testing::Verdict& v, size_t n, const char* tag) {
  const int W = c.world();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    const double k = op == ReduceOp::kAvg ? W : 1;
    std::vector<std::vector<float>> bufs(static_cast<size_t>(W), std::vector<float>(n));
    for (int root = 0; root < W; ++root) {
      for (size_t i = 0; i < n; ++i) bufs[root][i] = float(val(c.rank(), i + root) * k);
      c.reduce_async(bufs[root].data(), n, op, root);
    }
    c.progress();
    c.wait_all();
    const std::vector<float>& mine = bufs[c.rank()];
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int r = 0; r < W; ++r) want += val(r, i + c.rank());
      if (!v.expect(mine[i] == want, std::string(tag) + " reduce to root n=" + std::to_string(n))) return;
    }
  }
}

}  // namespace

int main() {
  return testing::for_each_reduction_order("collectives", [](Communicator& comm, testing::Verdict& v, const char* tag) {
    Communicator* c = &comm;
    const std::vector<size_t> sizes = testing::collective_test_sizes();
    for (size_t n : sizes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        check_all_reduce<float>(*c, v, n, op, tag);
        check_all_reduce<double>(*c, v, n, op, tag);
      }
      check_scatter_gather(*c, v, n, tag);
      check_reduce(*c, v, n, tag);
      // Async all-reduce: two buffers in flight, then wait.
      std::vector<float> a(n), b(n);
      for (size_t i = 0; i < n; ++i) a[i] = b[i] = float(val(c->rank(), i));
      c->all_reduce_async(a.data(), n, ReduceOp::kSum);
      c->all_reduce_async(b.data(), n, ReduceOp::kSum);
      c->progress();
      c->wait_all();
      for (size_t i = 0; i < n; ++i) {
        double want = 0;
        for (int r = 0; r < c->world(); ++r) want += val(r, i);
        v.expect(a[i] == want && b[i] == want, std::string(tag) + " async n=" + std::to_string(n));
      }
    }
    // On one rank every reduction is the identity and must not touch the buffer: a one-rank
    // device run (mpirun -np 1, backend: cuda) has no NCCL communicator and passes device
    // pointers here. A page this process cannot read stands in for one.
    if (c->world() == 1) {
      const size_t page = size_t(sysconf(_SC_PAGESIZE));
      void* p = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (v.expect(p != MAP_FAILED, "mmap")) {
        float* f = static_cast<float*>(p);
        c->all_reduce(f, page / sizeof(float), ReduceOp::kAvg);
        c->all_reduce_async(f, page / sizeof(float), ReduceOp::kAvg);
        c->reduce_async(f, page / sizeof(float), ReduceOp::kAvg, 0);
        c->progress();
        c->wait_all();
        munmap(p, page);
      }
    }
    // Broadcast of bytes from the last rank; a barrier; identity.
    std::vector<char> bytes(37, char(c->rank()));
    c->broadcast(bytes.data(), bytes.size(), c->world() - 1);
    for (char x : bytes) v.expect(x == char(c->world() - 1), "broadcast");
    c->barrier();
    v.expect(c->local_rank() >= 0 && c->local_rank() < c->local_world(), "local rank");
    v.expect(!c->hostname().empty() && std::string(c->kind()) == "mpi", "identity");
  });
}
