// What of the fused attention can be checked without a GPU, and therefore is checked on every
// CUDA build: the argument rules that send a call to the hand-written attention, and the
// cuDNN operation graphs of cudnn_sdpa_graphs.cc against the installed library: every
// tensor and operation descriptor must finalize (cuDNN checks types, ranks and the matmul
// shapes there) and the graphs must finalize as DAGs. Engine selection needs a device and is
// left to fused_attention_test.cc.
#include <gtest/gtest.h>

#include <cstdio>

#include "fused_attention.h"
#if LANSBERT_HAVE_CUDNN
#include "cudnn_sdpa_graphs.h"
#endif

namespace lansbert {
namespace {

const AttentionShape kBertBase{32, 12, 128, 64, 768};

TEST(FusedAttentionArgs, AcceptsBertShapesWithPrefixMasksWithAndWithoutDropout) {
  EXPECT_EQ(cuda::fused_attention_argument_check(kBertBase, 0.0f, true), "");
  EXPECT_EQ(cuda::fused_attention_argument_check(kBertBase, 0.1f, true), "");  // BERT's attention dropout
  EXPECT_EQ(cuda::fused_attention_argument_check({8, 16, 512, 64, 1024}, 0.0f, true), "");  // bert-large
  EXPECT_EQ(cuda::fused_attention_argument_check({2, 2, 32, 64, 128}, 0.0f, true), "");     // bert-tiny
}

TEST(FusedAttentionArgs, SaysWhyItFallsBack) {
  auto has = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  EXPECT_TRUE(has(cuda::fused_attention_argument_check(kBertBase, 1.0f, true), "dropout 1"));
  EXPECT_TRUE(has(cuda::fused_attention_argument_check(kBertBase, 0.0f, false), "prefix"));
  EXPECT_TRUE(has(cuda::fused_attention_argument_check({2, 4, 16, 12, 48}, 0.0f, true), "head_dim 12"));
  EXPECT_TRUE(has(cuda::fused_attention_argument_check({2, 1, 16, 256, 256}, 0.0f, true), "head_dim 256"));
  EXPECT_TRUE(has(cuda::fused_attention_argument_check({2, 4, 16, 64, 512}, 0.0f, true), "row stride"));
}

#if LANSBERT_HAVE_CUDNN

struct GraphCase {
  cuda::sdpa::GraphKind kind;
  bool backward;
  cuda::sdpa::Dims dims;
  bool dropout = false;
};

TEST(FusedAttentionGraphs, OperationsAndGraphsFinalizeInTheInstalledLibrary) {
  const cuda::CudnnApi& api = cuda::cudnn_api();
  if (!api.ok()) GTEST_SKIP() << "cuDNN not loadable here: " << api.error;
  std::printf("  %s (%s)\n", cuda::cudnn_version_string(api.version).c_str(), api.path.c_str());
  using cuda::sdpa::GraphKind;
  std::vector<GraphCase> cases;
  for (const cuda::sdpa::Dims& d : {cuda::sdpa::Dims{32, 12, 128, 64, 768}, cuda::sdpa::Dims{8, 16, 512, 64, 1024},
                                    cuda::sdpa::Dims{3, 2, 77, 64, 128}}) {
    for (bool dropout : {false, true}) {
      cases.push_back({GraphKind::kComposite, false, d, dropout});
      cases.push_back({GraphKind::kComposite, true, d, dropout});
    }
    // The unified forward node; its backward twin does not form a graph in cuDNN 9.19 (and
    // is tried after the composite one at run time), so it is not required here.
    if (cuda::sdpa::min_version(GraphKind::kUnified, false) && api.version >= 91500)
      cases.push_back({GraphKind::kUnified, false, d});
  }
  for (const GraphCase& c : cases) {
    cuda::dnn::GraphBuilder g;
    if (c.backward)
      cuda::sdpa::add_backward(g, c.kind, c.dims, c.dropout);
    else
      cuda::sdpa::add_forward(g, c.kind, c.dims, c.dropout);
    const std::string what = std::string(cuda::sdpa::name(c.kind)) + (c.backward ? " backward" : " forward") +
                             " S=" + std::to_string(c.dims.s) + (c.dropout ? " dropout" : "");
    EXPECT_TRUE(g.ok()) << what << ": " << g.error();
    EXPECT_TRUE(g.finalize_graph(nullptr)) << what << ": " << g.error();
    std::printf("  %-52s %2zu operations: %s\n", what.c_str(), g.operation_count(), g.ok() ? "finalized" : "FAILED");
  }
}

TEST(FusedAttentionGraphs, AWrongShapeIsRefusedByTheLibrary) {
  // The check above can fail: the same builder refuses a matmul whose shapes do not chain.
  const cuda::CudnnApi& api = cuda::cudnn_api();
  if (!api.ok()) GTEST_SKIP() << "cuDNN not loadable here: " << api.error;
  cuda::dnn::GraphBuilder g;
  auto a = g.tensor(1, CUDNN_DATA_BFLOAT16, {2, 4, 128, 64}, {32768, 8192, 64, 1});
  auto b = g.tensor(2, CUDNN_DATA_BFLOAT16, {2, 4, 128, 64}, {32768, 8192, 64, 1});  // not transposed
  auto c = g.tensor(3, CUDNN_DATA_FLOAT, {2, 4, 128, 128}, {65536, 16384, 128, 1});
  g.matmul(a, b, c);
  EXPECT_FALSE(g.ok());
  EXPECT_NE(g.error().find("matmul"), std::string::npos) << g.error();
}

TEST(FusedAttentionGraphs, TheUnifiedNodeTakesNoDropoutMask) {
  const cuda::CudnnApi& api = cuda::cudnn_api();
  if (!api.ok()) GTEST_SKIP() << "cuDNN not loadable here: " << api.error;
  for (bool backward : {false, true}) {
    cuda::dnn::GraphBuilder g;
    if (backward)
      cuda::sdpa::add_backward(g, cuda::sdpa::GraphKind::kUnified, {2, 4, 64, 64, 256}, true);
    else
      cuda::sdpa::add_forward(g, cuda::sdpa::GraphKind::kUnified, {2, 4, 64, 64, 256}, true);
    EXPECT_FALSE(g.ok());
    EXPECT_NE(g.error().find("no dropout mask"), std::string::npos) << g.error();
  }
}

#endif  // LANSBERT_HAVE_CUDNN

}  // namespace
}  // namespace lansbert
