// compare_params REF.safetensors GOT.safetensors [TOL [TENSOR_TOL]]: compares two checkpoints'
// parameters (F32). Fails when
// - the whole model's ||got - ref|| / ||ref|| exceeds TOL (default 1e-6), or
// - any tensor's ||got - ref|| / ||ref||, or max |got - ref| / max |ref| over all compared
//   tensors, exceeds TENSOR_TOL (default 10 x TOL).
// Why two bounds: summation-order rounding that LANS's eps amplifies lands on single elements
// of small tensors (testing::ModelDiff), which the per-tensor and per-element measures see
// undiluted; the whole-model one is the relative difference the data-parallel tests promise.
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
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: compare_params REF.safetensors GOT.safetensors [TOL [TENSOR_TOL]]\n");
    return 2;
  }
  const double tol = argc > 3 ? std::atof(argv[3]) : 1e-6;
  const double tensor_tol = argc > 4 ? std::atof(argv[4]) : 10 * tol;
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
  testing::ModelDiff model;
  double worst_rel = 0;
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
    model.add(t);
    if (t.rel > worst_rel) worst_rel = t.rel, worst = name;
    if (!(t.rel <= tensor_tol)) {
      std::printf("FAIL: %s ||d||/||p|| = %.3g > %.3g\n", name.c_str(), t.rel, tensor_tol);
      ok = false;
    }
  }
  if (!(model.max() <= tensor_tol)) {
    std::printf("FAIL: max |d| / max |p| = %.3g > %.3g\n", model.max(), tensor_tol);
    ok = false;
  }
  if (!(model.norm() <= tol)) {
    std::printf("FAIL: ||d|| / ||p|| = %.3g > %.3g\n", model.norm(), tol);
    ok = false;
  }
  std::printf("%s: %zu tensors compared, ||d||/||p|| %.3g, worst tensor %.3g (%s), max |d|/max |p| %.3g, "
              "%zu of %zu values identical\n",
              ok ? "ok" : "FAIL", compared, model.norm(), worst_rel, worst.c_str(), model.max(), identical, total);
  return ok ? 0 : 1;
}
