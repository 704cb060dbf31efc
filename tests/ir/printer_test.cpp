// Golden-text test of the IR printer (regenerate with TUNEC_UPDATE_GOLDEN=1).
#include "ir/graph.h"
#include "ir/printer.h"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace tunec {
namespace {

TEST(Printer, SmallGraphMatchesGolden) {
  Graph g;
  ValueId x = g.addInput("x", {DType::F32, Shape{1, 8, 4, 4}, {}});
  ValueId w = g.addConstant("w", Tensor(DType::F32, Shape{16, 8, 1, 1}));
  auto conv = g.addNode("conv", OpKind::Conv, ConvAttrs{{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
                        {x, w}, {"c"});
  ASSERT_TRUE(conv.isOk());
  auto clip = g.addNode("clip", OpKind::Clip, ClipAttrs{0, 6}, {g.node(*conv).outputs[0]}, {"r"});
  ASSERT_TRUE(clip.isOk());
  auto pool =
      g.addNode("pool", OpKind::GlobalAveragePool, NoAttrs{}, {g.node(*clip).outputs[0]}, {"p"});
  ASSERT_TRUE(pool.isOk());
  auto flat = g.addNode("flat", OpKind::Flatten, AxisAttrs{1}, {g.node(*pool).outputs[0]}, {"y"});
  ASSERT_TRUE(flat.isOk());
  g.addOutput(g.node(*flat).outputs[0]);
  std::string text = printGraph(g);

  std::string path = std::string(TUNEC_SOURCE_DIR) + "/tests/ir/golden/small_graph.txt";
  if (std::getenv("TUNEC_UPDATE_GOLDEN")) std::ofstream(path) << text;
  std::ifstream file(path);
  ASSERT_TRUE(file) << "missing golden file " << path;
  std::stringstream want;
  want << file.rdbuf();
  EXPECT_EQ(text, want.str());
}

} // namespace
} // namespace tunec
