// edit_distance and nearest_name: the "did you mean" behind the config's unknown-key errors.
#include "lansbert/core/nearest_name.h"

#include <gtest/gtest.h>

namespace lansbert {
namespace {

TEST(NearestName, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("dtpye", "dtype"), 2u);  // a swap is two substitutions
  EXPECT_EQ(edit_distance("lr", "lrr"), 1u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

TEST(NearestName, SuggestsOnlyLikelyTypos) {
  const std::vector<std::string> keys = {"optimizer.lr", "optimizer.name", "data.max_pred", "data", "model"};
  EXPECT_EQ(nearest_name("optimizer.lrr", keys), "optimizer.lr");
  EXPECT_EQ(nearest_name("data.max6pred", keys), "data.max_pred");
  EXPECT_EQ(nearest_name("2ata", keys), "data");            // one edit: allowed for a short name
  EXPECT_EQ(nearest_name("zzzz", keys), "");                // four edits from everything
  EXPECT_EQ(nearest_name("optimizer.zzzzzzzz", keys), "");  // more than a quarter of the name
  EXPECT_EQ(nearest_name("data", keys), "data");
  EXPECT_EQ(nearest_name("x", {}), "");
}

}  // namespace
}  // namespace lansbert
