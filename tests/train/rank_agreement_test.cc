// json_differences: the leaves where a rank's view differs from rank 0's, named by path with
// both values (rank_agreement.h; the collective check runs under mpirun in
// tests/dist/rank_agreement_test.sh).
#include <gtest/gtest.h>

#include "lansbert/train/rank_agreement.h"

namespace lansbert {
namespace {

TEST(RankAgreement, DifferencesNameEachLeafWithBothValues) {
  const auto mine = nlohmann::json::parse(
      R"({"optimizer": {"lr": 0.5, "name": "lans"}, "data": {"train": ["a/*.lbs", "b/*.lbs"]}, "seed": 3, "only_here": 1})");
  const auto theirs = nlohmann::json::parse(
      R"({"optimizer": {"lr": 0.007, "name": "lans"}, "data": {"train": ["a/*.lbs", "c/*.lbs"]}, "seed": 3, "only_there": true})");
  const std::vector<std::string> want = {
      R"(data.train[1] is "b/*.lbs" here, "c/*.lbs" on rank 0)",
      "only_here is 1 here, absent on rank 0",
      "only_there is absent here, true on rank 0",
      "optimizer.lr is 0.5 here, 0.007 on rank 0",
  };
  EXPECT_EQ(json_differences(mine, theirs, 10), want);
  // At most `limit`, in path order; none for equal views (an empty list is a leaf too).
  EXPECT_EQ(json_differences(mine, theirs, 2), std::vector<std::string>(want.begin(), want.begin() + 2));
  EXPECT_TRUE(json_differences(mine, mine, 10).empty());
  EXPECT_EQ(json_differences(nlohmann::json::parse(R"({"eval": []})"), nlohmann::json::parse(R"({"eval": ["x"]})"), 10),
            (std::vector<std::string>{"eval is [] here, absent on rank 0", R"(eval[0] is absent here, "x" on rank 0)"}));
}

}  // namespace
}  // namespace lansbert
