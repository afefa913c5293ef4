#include "config/parameters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inflight::config {
namespace {

using ::testing::ElementsAre;

inference::ModelConfig WithParameters(
    std::initializer_list<std::pair<std::string, std::string>> params) {
  inference::ModelConfig config;
  config.set_name("parameters_test");
  for (const auto& [k, v] : params) (*config.mutable_parameters())[k].set_string_value(v);
  return config;
}

TEST(ParametersTest, IsUnfilledPlaceholder) {
  EXPECT_TRUE(IsUnfilledPlaceholder("${engine_dir}"));
  EXPECT_TRUE(IsUnfilledPlaceholder("  ${x} "));
  EXPECT_FALSE(IsUnfilledPlaceholder("${}"));
  EXPECT_FALSE(IsUnfilledPlaceholder(""));
  EXPECT_FALSE(IsUnfilledPlaceholder("$engine_dir"));
  EXPECT_FALSE(IsUnfilledPlaceholder("/models/${x}/engine"));
  EXPECT_FALSE(IsUnfilledPlaceholder("${a}${b}"));
  EXPECT_FALSE(IsUnfilledPlaceholder("0.5"));
}

TEST(ParametersTest, GetParameterTreatsAbsentEmptyAndUnfilledAsUnset) {
  auto config = WithParameters({{"set", " 0.5"},
                                {"empty", ""},
                                {"blank", "  "},
                                {"unfilled", "${kv_cache_free_gpu_mem_fraction}"}});
  EXPECT_EQ(GetParameter(config, "set"), " 0.5");
  EXPECT_EQ(GetParameter(config, "empty"), std::nullopt);
  EXPECT_EQ(GetParameter(config, "blank"), std::nullopt);
  EXPECT_EQ(GetParameter(config, "unfilled", "0.9"), std::nullopt);
  EXPECT_EQ(GetParameter(config, "absent"), std::nullopt);
}

TEST(ParametersTest, TypedGettersParseOrExplain) {
  auto config =
      WithParameters({{"b", "True"}, {"i", "-12"}, {"f", "0.25"}, {"bad", "abc"}, {"u", "${u}"}});
  EXPECT_EQ(GetBoolParameter(config, "b").value(), std::optional<bool>(true));
  EXPECT_EQ(GetIntParameter(config, "i").value(), std::optional<int64_t>(-12));
  EXPECT_EQ(GetFloatParameter(config, "f").value(), std::optional<double>(0.25));
  EXPECT_EQ(GetFloatParameter(config, "u").value(), std::nullopt);
  EXPECT_EQ(GetIntParameter(config, "missing").value(), std::nullopt);

  auto bad_bool = GetBoolParameter(config, "bad");
  ASSERT_FALSE(bad_bool.ok());
  EXPECT_EQ(bad_bool.status().message(),
            "Invalid value \"abc\" for parameter bad: expected true or false");
  auto bad_int = GetIntParameter(config, "bad");
  ASSERT_FALSE(bad_int.ok());
  EXPECT_EQ(bad_int.status().message(),
            "Invalid value \"abc\" for parameter bad: expected an integer");
  auto bad_float = GetFloatParameter(config, "bad");
  ASSERT_FALSE(bad_float.ok());
  EXPECT_EQ(bad_float.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_float.status().message(),
            "Invalid value \"abc\" for parameter bad: expected a number");
}

TEST(ParametersTest, ValueParsers) {
  for (const char* t : {"true", "TRUE", "True", "yes", "1", " true "}) {
    EXPECT_TRUE(ParseBoolValue("k", t).value()) << t;
  }
  for (const char* f : {"false", "False", "no", "0"}) EXPECT_FALSE(ParseBoolValue("k", f).value());
  EXPECT_FALSE(ParseBoolValue("k", "2").ok());
  EXPECT_FALSE(ParseBoolValue("k", "").ok());

  EXPECT_EQ(ParseIntValue("k", "+42").value(), 42);
  EXPECT_EQ(ParseIntValue("k", "9223372036854775807").value(), INT64_MAX);
  for (const char* bad : {"", "4.5", "1e3", "12abc", "0x10", "99999999999999999999", "- 1"}) {
    EXPECT_FALSE(ParseIntValue("k", bad).ok()) << bad;
  }
  EXPECT_DOUBLE_EQ(ParseFloatValue("k", "0.5").value(), 0.5);
  EXPECT_DOUBLE_EQ(ParseFloatValue("k", "1e-3").value(), 1e-3);
  EXPECT_DOUBLE_EQ(ParseFloatValue("k", "2").value(), 2.0);
  for (const char* bad : {"", "nan", "inf", "0.5x", ".", "1e999"}) {
    EXPECT_FALSE(ParseFloatValue("k", bad).ok()) << bad;
  }
}

TEST(ParametersTest, CsvIntsLikeNvidiaCsvStrToVecInt) {
  EXPECT_THAT(ParseCsvInts("k", "1,2,3").value(), ElementsAre(1, 2, 3));
  EXPECT_THAT(ParseCsvInts("k", "4096").value(), ElementsAre(4096));
  EXPECT_THAT(ParseCsvInts("k", " 1, 2 ,3 ").value(), ElementsAre(1, 2, 3));
  EXPECT_THAT(ParseCsvInts("k", "1,2,").value(), ElementsAre(1, 2));  // trailing comma allowed
  EXPECT_THAT(ParseCsvInts("k", "-1").value(), ElementsAre(-1));
  for (const char* bad : {"a", ",,", ",", "", "1,,2", "1;2", "1 2", "3000000000"}) {
    auto r = ParseCsvInts("max_attention_window_size", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), std::string("Invalid value \"") + bad +
                                        "\" for parameter max_attention_window_size: expected a "
                                        "comma-separated list of integers");
  }
}

TEST(ParametersTest, CsvIntGroupsLikeCsvStrToVecVecInt) {
  auto groups = ParseCsvIntGroups("medusa_choices", "{1,5},{1,2,3}");
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_THAT((*groups)[0], ElementsAre(1, 5));
  EXPECT_THAT((*groups)[1], ElementsAre(1, 2, 3));
  EXPECT_EQ(ParseCsvIntGroups("k", " {0}, {0, 0} ").value().size(), 2u);
  EXPECT_EQ(ParseCsvIntGroups("k", "{0},").value().size(), 1u);  // trailing comma, as csv
  for (const char* bad : {"", "1,2", "{1,2", "{}", "{1}{2}", "{1},,{2}", "{a}", "{1},x"}) {
    EXPECT_FALSE(ParseCsvIntGroups("k", bad).ok()) << bad;
  }
}

TEST(ParametersTest, DeviceIdGroups) {
  auto groups = ParseDeviceIdGroups("gpu_device_ids", "0,1;2,3");
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_THAT((*groups)[0], ElementsAre(0, 1));
  EXPECT_THAT((*groups)[1], ElementsAre(2, 3));
  EXPECT_EQ(ParseDeviceIdGroups("k", "0").value().size(), 1u);
  for (const char* bad : {"", ";", "0;", "0,1;;2", "-1", "a"}) {
    auto r = ParseDeviceIdGroups("gpu_device_ids", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("gpu_device_ids"), std::string::npos);
  }
}

}  // namespace
}  // namespace inflight::config
