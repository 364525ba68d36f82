// The single-process communicator: what a run without mpirun uses; the wire-format names.
#include <cstring>

#include "lansbert/core/host_name.h"
#include "lansbert/dist/communicator.h"

namespace lansbert {

namespace {
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_world() const override { return 1; }
  std::string hostname() const override { return host_name(); }
  const char* kind() const override { return "single"; }
  void all_reduce(float*, size_t, ReduceOp) override {}
  void all_reduce(double*, size_t, ReduceOp) override {}
  void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp) override {
    if (send != recv) std::memmove(recv, send, count * sizeof(float));
  }
  void all_gather(const float* send, float* recv, size_t count) override {
    if (send != recv) std::memmove(recv, send, count * sizeof(float));
  }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
};
}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcess>();
}

bool parse_grad_wire(const std::string& s, GradWire* out) {
  if (s == "fp32") {
    *out = std::nullopt;
  } else if (s == "bf16") {
    *out = kern::HalfFormat::kBf16;
  } else if (s == "fp16") {
    *out = kern::HalfFormat::kFp16;
  } else {
    return false;
  }
  return true;
}

}  // namespace lansbert
