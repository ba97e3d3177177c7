// train.max_runtime's durations: units, Slurm's clock form, and refusals (a bare number's
// unit is ambiguous).
#include "config/duration.h"

#include <gtest/gtest.h>

namespace trident::config {
namespace {

TEST(Duration, UnitsAndClockForms) {
  EXPECT_EQ(parse_duration("0"), 0.0);
  EXPECT_EQ(parse_duration("90s"), 90.0);
  EXPECT_EQ(parse_duration("45m"), 2700.0);
  EXPECT_EQ(parse_duration("2h30m"), 9000.0);
  EXPECT_EQ(parse_duration("1.5h"), 5400.0);
  EXPECT_EQ(parse_duration("1d"), 86400.0);
  EXPECT_EQ(parse_duration("1d2h3m4.5s"), 86400.0 + 7200.0 + 180.0 + 4.5);
  EXPECT_EQ(parse_duration("0.25s"), 0.25);
  EXPECT_EQ(parse_duration("04:00:00"), 14400.0);
  EXPECT_EQ(parse_duration("100:00:00"), 360000.0);
  EXPECT_EQ(parse_duration("1-12:00:30"), 86400.0 + 43200.0 + 30.0);
  EXPECT_EQ(parse_duration("0:00:05"), 5.0);
}

TEST(Duration, RefusesWhatCouldBeReadTwoWays) {
  for (const char* bad : {"", "60", "3600", "1.5", "m", "h1", "-5m", "+5m", "5 m", "5min", "2m1h", "1h1h", "5mx",
                          "1:00", "1:60:00", "1:00:60", "1:0:00", "1:00:0", "x-01:00:00", "-01:00:00", "01:00:00:00",
                          "1e3s", "nans", "infs"})
    EXPECT_FALSE(parse_duration(bad).has_value()) << "'" << bad << "'";
}

}  // namespace
}  // namespace trident::config
