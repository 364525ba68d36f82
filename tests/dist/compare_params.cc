// compare_params REF.safetensors GOT.safetensors [TOL]: compares two checkpoints' parameters
// tensor by tensor (F32). Fails when any tensor's ||got - ref|| / ||ref|| exceeds TOL
// (default 1e-6), or max |got - ref| over all compared tensors exceeds TOL * max |ref|.
//
// Not compared (reported only): the attention key biases (testing::has_zero_true_gradient).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lansbert/model/safetensors.h"
#include "tensor_diff.h"

using namespace lansbert;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: compare_params REF.safetensors GOT.safetensors [TOL]\n");
    return 2;
  }
  const double tol = argc > 3 ? std::atof(argv[3]) : 1e-6;
  SafetensorsFile ref, got;
  for (auto [path, file] : {std::pair{argv[1], &ref}, std::pair{argv[2], &got}}) {
    Status s = read_safetensors(path, file);
    if (!s.is_ok()) {
      std::fprintf(stderr, "compare_params: %s\n", s.to_string().c_str());
      return 2;
    }
  }
  bool ok = ref.tensors.size() == got.tensors.size();
  if (!ok) std::printf("FAIL: %zu vs %zu tensors\n", ref.tensors.size(), got.tensors.size());
  double maxd = 0, maxp = 0, worst_rel = 0;
  std::string worst;
  size_t compared = 0, identical = 0, total = 0;
  for (const auto& [name, rt] : ref.tensors) {
    auto it = got.tensors.find(name);
    if (it == got.tensors.end() || it->second.shape != rt.shape || rt.dtype != StDtype::kF32 ||
        it->second.dtype != StDtype::kF32) {
      std::printf("FAIL: %s missing or of another shape/dtype\n", name.c_str());
      ok = false;
      continue;
    }
    const size_t n = (rt.end - rt.begin) / sizeof(float);
    std::vector<float> a(n), b(n);
    std::memcpy(a.data(), ref.data(rt), n * sizeof(float));
    std::memcpy(b.data(), got.data(it->second), n * sizeof(float));
    const testing::TensorDiff t = testing::tensor_diff(b.data(), a.data(), n);
    identical += t.identical;
    total += n;
    if (testing::has_zero_true_gradient(name)) {
      std::printf("  not compared: %s ||d||/||p|| = %.3g (zero true gradient)\n", name.c_str(), t.rel);
      continue;
    }
    ++compared;
    maxd = std::max(maxd, t.max_abs_diff);
    maxp = std::max(maxp, t.max_abs_ref);
    const double rel = t.rel;
    if (rel > worst_rel) worst_rel = rel, worst = name;
    if (!(rel <= tol)) {
      std::printf("FAIL: %s ||d||/||p|| = %.3g > %.3g\n", name.c_str(), rel, tol);
      ok = false;
    }
  }
  const double glob = maxp > 0 ? maxd / maxp : maxd;
  if (!(glob <= tol)) {
    std::printf("FAIL: max |d| / max |p| = %.3g > %.3g\n", glob, tol);
    ok = false;
  }
  std::printf("%s: %zu tensors compared, worst ||d||/||p|| %.3g (%s), max |d|/max |p| %.3g, %zu of %zu "
              "values identical\n",
              ok ? "ok" : "FAIL", compared, worst_rel, worst.c_str(), glob, identical, total);
  return ok ? 0 : 1;
}
