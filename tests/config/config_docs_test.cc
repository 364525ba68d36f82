// docs/training.md's "Config schema" table names exactly the keys the loader accepts: one
// row per section, "key (what it means, in parentheses), key, ..."; the keys are what is
// left outside the parentheses. A key added to the schema without a word in the docs, or a
// documented key the loader no longer knows, fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "lansbert/config/config_loader.h"

namespace lansbert {
namespace {

// The names outside parentheses in one table cell, split at the commas there.
std::set<std::string> keys_in_cell(const std::string& cell, std::string* error) {
  std::set<std::string> keys;
  std::string item;
  int depth = 0;
  auto finish = [&] {
    std::istringstream words(item);
    std::string name, rest;
    words >> name;
    if (words >> rest) *error += "'" + item + "' is more than a key name outside parentheses; ";
    if (!name.empty()) keys.insert(name);
    item.clear();
  };
  for (char ch : cell) {
    if (ch == '(') {
      ++depth;
    } else if (ch == ')') {
      if (--depth < 0) *error += "a ')' without its '('; ";
    } else if (depth == 0) {
      if (ch == ',') finish();
      else item += ch;
    }
  }
  if (depth != 0) *error += "unbalanced parentheses; ";
  finish();
  return keys;
}

TEST(ConfigDocs, TrainingMdNamesExactlyTheLoadersKeys) {
  const std::string path = std::string(LANSBERT_SOURCE_DIR) + "/docs/training.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::map<std::string, std::set<std::string>> documented;  // section ("" at top level) -> keys
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("## Config schema")) in_table = true;
    else if (line.starts_with("## ")) in_table = false;
    if (!in_table || !line.starts_with("| ") || line.starts_with("| section") || line.starts_with("|---")) continue;
    const size_t bar = line.find(" | ", 2);
    ASSERT_NE(bar, std::string::npos) << line;
    std::string section = line.substr(2, bar - 2);
    std::string cell = line.substr(bar + 3);
    ASSERT_TRUE(cell.ends_with(" |")) << line;
    cell.resize(cell.size() - 2);
    if (section == "top level") section.clear();
    std::string error;
    documented[section] = keys_in_cell(cell, &error);
    EXPECT_TRUE(error.empty()) << path << ", row '" << section << "': " << error;
  }
  ASSERT_FALSE(documented.empty()) << path << ": no Config schema table";

  std::map<std::string, std::set<std::string>> loaded;
  for (const std::string& key : train_config_keys()) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) loaded[""].insert(key);
    else loaded[key.substr(0, dot)].insert(key.substr(dot + 1));
  }
  for (const auto& [section, keys] : loaded) {
    const std::string row = section.empty() ? "top level" : section;
    for (const std::string& k : keys)
      EXPECT_TRUE(documented[section].count(k)) << path << ": the '" << row << "' row does not name " << k;
  }
  for (const auto& [section, keys] : documented) {
    for (const std::string& k : keys)
      EXPECT_TRUE(loaded[section].count(k))
          << path << ": the '" << (section.empty() ? "top level" : section) << "' row names " << k
          << ", which the loader does not accept";
  }
}

}  // namespace
}  // namespace lansbert
