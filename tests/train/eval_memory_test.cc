// `lansbert eval`'s memory check (check_eval_batch_fits): a micro-batch that cannot fit is
// refused before the model allocates it, naming both sizes and a --micro-batch that fits.
#include <gtest/gtest.h>

#include "lansbert/model/bert_model.h"
#include "lansbert/model/param_table.h"
#include "lansbert/train/evaluate.h"

namespace lansbert {
namespace {

double bytes_of(const BertConfig& c, int b) {
  return double(make_bert_param_table(c).total_elements() * sizeof(float) +
                BertModel<float>::activation_bytes_for(c, eval_limits(b, 512, 80)));
}

TEST(EvalMemory, TooLargeAMicroBatchIsRefusedWithOneThatFits) {
  BertConfig c;
  ASSERT_TRUE(bert_preset("bert-large", &c).is_ok());
  const double gib = 1073741824.0;
  // 8 GiB: bert-large's weights (1.3 GiB) and some tens of sequences of 512 tokens.
  const double have = 8 * gib;
  EXPECT_TRUE(check_eval_batch_fits(c, 1, 512, 80, have, "this host's memory").is_ok());
  const Status st = check_eval_batch_fits(c, 4096, 512, 80, have, "this host's memory");
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("a micro-batch of 4096 sequences needs about"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("more than the 8.0 GiB of this host's memory"), std::string::npos) << st.message();
  // The suggestion is a halving of the asked size that fits, and its double does not.
  const size_t at = st.message().find("pass --micro-batch ");
  ASSERT_NE(at, std::string::npos) << st.message();
  const int fits = std::stoi(st.message().substr(at + 19));
  EXPECT_EQ(4096 % fits, 0);
  EXPECT_LE(bytes_of(c, fits), have);
  EXPECT_GT(bytes_of(c, 2 * fits), have);
  // Unknown memory: no check; and one sequence too many for a tiny memory says so.
  EXPECT_TRUE(check_eval_batch_fits(c, 4096, 512, 80, 0, "free memory on a device").is_ok());
  const Status none = check_eval_batch_fits(c, 8, 512, 80, 0.5 * gib, "free memory on a device");
  EXPECT_NE(none.message().find("not even one sequence fits"), std::string::npos) << none.message();
}

}  // namespace
}  // namespace lansbert
