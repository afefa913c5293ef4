#include "common/flags.h"

#include <gtest/gtest.h>

namespace inflight::tools {
namespace {

char* Arg(const char* s) {
  return const_cast<char*>(s);
}

TEST(Flags, SplitCommasKeepsEmptyItems) {
  EXPECT_EQ(SplitCommas("128/128,2048/128"), (std::vector<std::string>{"128/128", "2048/128"}));
  EXPECT_EQ(SplitCommas("a,,b"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(SplitCommas("1,8,"), (std::vector<std::string>{"1", "8", ""}));
  EXPECT_EQ(SplitCommas(""), (std::vector<std::string>{""}));
}

TEST(Flags, IntListTakesEveryItemAndRefusesBadOnesByName) {
  std::vector<std::int64_t> v = {7};
  ASSERT_TRUE(ParseIntList("--batches", "1,8,64", 1, 256, &v).ok());
  EXPECT_EQ(v, (std::vector<std::int64_t>{1, 8, 64}));

  for (const char* bad : {"1,,8", "1,8,", "", "1,x", "0,8", "1,300"}) {
    const Status s = ParseIntList("--batches", bad, 1, 256, &v);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--batches"), std::string::npos) << s.message();
  }
  EXPECT_EQ(v, (std::vector<std::int64_t>{1, 8, 64}));  // a refused list leaves `out` as it was
}

TEST(Flags, ChoiceSetKeepsEachNameOnceAndNamesTheChoicesWhenRefusing) {
  const std::vector<std::string> choices = {"decode", "context", "norm"};
  std::set<std::string> v;
  ASSERT_TRUE(ParseChoiceSet("--sections", "norm,decode,norm", choices, &v).ok());
  EXPECT_EQ(v, (std::set<std::string>{"decode", "norm"}));

  const Status s = ParseChoiceSet("--sections", "decode,rope", choices, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\"rope\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("decode, context, norm"), std::string::npos) << s.message();
  EXPECT_FALSE(ParseChoiceSet("--sections", "decode,", choices, &v).ok());
}

TEST(Flags, ListFlagsParseThroughAFlagSet) {
  std::vector<std::int64_t> v;
  FlagSet flags("prog", "test");
  flags.Add("contexts", "LIST", "", [&](const std::string& text) {
    return ParseIntList("--contexts", text, 1, 1 << 20, &v);
  });
  char* argv[] = {Arg("prog"), Arg("--contexts=512,4096")};
  const Result<bool> parsed = flags.Parse(2, argv);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed.value());
  EXPECT_EQ(v, (std::vector<std::int64_t>{512, 4096}));
}

// A second flag of one name would never be reached (the first takes its values): Parse refuses
// the program's flag set rather than ignore what the user typed.
TEST(Flags, ANameAddedTwiceIsRefusedByName) {
  std::int64_t first = 0, second = 0;
  FlagSet flags("prog", "test");
  flags.Add("max_batch_size", "N", "",
            [&](const std::string& t) { return ParseInt("--max_batch_size", t, 1, 9, &first); });
  flags.Add("max_batch_size", "N", "",
            [&](const std::string& t) { return ParseInt("--max_batch_size", t, 1, 9, &second); });
  char* argv[] = {Arg("prog"), Arg("--max_batch_size=4")};
  const Result<bool> parsed = flags.Parse(2, argv);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("--max_batch_size is defined twice"), std::string::npos)
      << parsed.status().ToString();
  EXPECT_EQ(first, 0);
}

}  // namespace
}  // namespace inflight::tools
