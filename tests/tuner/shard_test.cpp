// Shard planning: the "I/N" flag, and a split that covers every task once, is the same whatever
// the order of the tasks, and is balanced.
#include "tuner/shard.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <numeric>
#include <random>

namespace tunec::tuner {
namespace {

std::vector<Task> randomTasks(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Task> tasks;
  for (int i = 0; i < count; ++i) {
    Task t;
    t.key = "task" + std::to_string(i);
    t.weight = 1 + static_cast<double>(rng() % 4);
    t.flops = 1e6 * static_cast<double>(1 + rng() % 1000);
    tasks.push_back(t);
  }
  return tasks;
}

TEST(Shard, ParsesIndexOfCount) {
  auto s = parseShard("2/5");
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 5);
  EXPECT_TRUE(parseShard("0/1").isOk());
  for (const char* bad :
       {"", "1", "/2", "1/", "a/2", "1/b", "-1/2", "1/0", "1/2/3", " 1/2", "1.0/2"})
    EXPECT_FALSE(parseShard(bad).isOk()) << bad;
  auto out = parseShard("4/4");
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.error().message().find("out of range"), std::string::npos);
  EXPECT_NE(out.error().message().find("0 to 3"), std::string::npos);
}

TEST(Shard, EveryTaskInOneShardWhateverTheOrder) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::vector<Task> tasks = randomTasks(37, seed);
    for (int count : {1, 2, 3, 8, 50}) {
      ShardPlan plan = planShards(tasks, count);
      ASSERT_EQ(plan.shardOf.size(), tasks.size());
      ASSERT_EQ(plan.shardLoad.size(), static_cast<size_t>(count));
      std::map<std::string, int> shardOfKey;
      std::vector<double> load(static_cast<size_t>(count), 0.0);
      for (size_t i = 0; i < tasks.size(); ++i) {
        ASSERT_GE(plan.shardOf[i], 0);
        ASSERT_LT(plan.shardOf[i], count);
        shardOfKey[tasks[i].key] = plan.shardOf[i];
        load[static_cast<size_t>(plan.shardOf[i])] += expectedLoad(tasks[i]);
      }
      for (int c = 0; c < count; ++c)
        EXPECT_DOUBLE_EQ(load[static_cast<size_t>(c)], plan.shardLoad[static_cast<size_t>(c)]);
      double shares = 0;
      for (int c = 0; c < count; ++c) shares += shardShare(plan, Shard{c, count});
      EXPECT_NEAR(shares, 1.0, 1e-12);
      // Balanced as LPT guarantees: no shard is heavier than the lightest by more than the
      // heaviest task (with fewer tasks than shards, some shards are empty).
      double heaviest = 0;
      for (const Task& t : tasks) heaviest = std::max(heaviest, expectedLoad(t));
      auto [lo, hi] = std::minmax_element(plan.shardLoad.begin(), plan.shardLoad.end());
      EXPECT_LE(*hi - *lo, heaviest) << "count " << count;
      // Another machine lists the tasks in another order: the same split.
      std::vector<Task> shuffled = tasks;
      std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(seed + 100));
      ShardPlan again = planShards(shuffled, count);
      for (size_t i = 0; i < shuffled.size(); ++i)
        EXPECT_EQ(again.shardOf[i], shardOfKey.at(shuffled[i].key));
    }
  }
}

TEST(Shard, MoreShardsThanTasksLeavesSomeEmpty) {
  std::vector<Task> tasks = randomTasks(3, 7);
  ShardPlan plan = planShards(tasks, 5);
  std::vector<int> sorted = plan.shardOf;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()) - sorted.begin(), 3);
  int empty = 0;
  for (double l : plan.shardLoad) empty += l == 0;
  EXPECT_EQ(empty, 2);
}

} // namespace
} // namespace tunec::tuner
