// ONNX importer: typed attributes, static shapes, and every user error message.
#include "frontend/onnx_importer.h"
#include "reference/reference.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace tunec {
namespace {

/// Builds small ONNX models in memory.
class ModelBuilder {
public:
  explicit ModelBuilder(int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }
  ModelBuilder& input(const std::string& name, std::vector<int64_t> dims,
                      int elem = onnx::TensorProto::FLOAT, const std::string& dynamicName = "") {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param(dynamicName);
      else
        dim->set_dim_value(d);
    }
    return *this;
  }
  /// An input whose dimensions are numbers or symbols ("batch"; "" for an unnamed dynamic one).
  ModelBuilder& inputDims(const std::string& name, std::vector<std::string> dims,
                          int elem = onnx::TensorProto::FLOAT) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
        dim->set_dim_value(std::stoll(d));
      else if (!d.empty())
        dim->set_dim_param(d);
    }
    return *this;
  }
  ModelBuilder& output(const std::string& name) {
    model_.mutable_graph()->add_output()->set_name(name);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return *n;
  }
  ModelBuilder& initializerInts(const std::string& name, std::vector<int64_t> v) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return *this;
  }
  /// A scalar initializer of ONNX type `elem` holding `v` (float data, or int32 data for bool).
  ModelBuilder& initializerScalar(const std::string& name, int elem, double v) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    if (elem == onnx::TensorProto::FLOAT)
      t->add_float_data(static_cast<float>(v));
    else
      t->add_int32_data(static_cast<int32_t>(v));
    return *this;
  }
  ModelBuilder& initializerFloats(const std::string& name, std::vector<int64_t> dims,
                                  std::vector<float> v) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  std::string bytes() const { return model_.SerializeAsString(); }
  ModelBuilder& initializerInt8(const std::string& name, std::vector<int64_t> dims,
                                std::vector<int8_t> v) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT8);
    for (int64_t d : dims) t->add_dims(d);
    for (int8_t x : v) t->add_int32_data(x);
    return *this;
  }
  ModelBuilder& initializerInt32(const std::string& name, std::vector<int64_t> dims,
                                 std::vector<int32_t> v) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT32);
    for (int64_t d : dims) t->add_dims(d);
    for (int32_t x : v) t->add_int32_data(x);
    return *this;
  }
  /// Imports another operator set (com.microsoft).
  ModelBuilder& domain(const std::string& name, int version) {
    auto* op = model_.add_opset_import();
    op->set_domain(name);
    op->set_version(version);
    return *this;
  }

private:
  onnx::ModelProto model_;
};

void addIntAttr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void addIntsAttr(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void addFloatAttr(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void addStringAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

Expected<Graph> import(const ModelBuilder& b, ImportOptions options = {}) {
  options.evaluator = runReferenceNode;
  return importOnnxBytes(b.bytes(), "", options);
}

TEST(Importer, ReshapeTargetBecomesTypedAttribute) {
  ModelBuilder b;
  b.input("x", {2, 3, 4}).initializerInts("shape", {0, -1}).output("y");
  b.node("Reshape", {"x", "shape"}, {"y"}, "r");
  auto g = import(b);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(std::get<ReshapeAttrs>(g->nodes()[0].attrs).shape, (std::vector<Dim>{2, 12}));
  EXPECT_EQ(g->nodes()[0].inputs.size(), 1u);
}

// Nodes listed after their readers (onnxconverter-common's float16 conversion appends its input
// Casts at the end; ONNX Runtime sorts) import in dependency order; a cycle is named.
TEST(Importer, NodesOutOfOrderImportSortedAndACycleIsNamed) {
  ModelBuilder b;
  b.input("x", {2, 3}).output("z");
  b.node("Relu", {"y"}, {"z"}, "second");
  b.node("Neg", {"x"}, {"y"}, "first");
  auto g = import(b);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  ASSERT_EQ(g->nodes().size(), 2u);
  EXPECT_EQ(g->nodes()[0].kind, OpKind::Neg);
  EXPECT_EQ(g->nodes()[1].kind, OpKind::Relu);

  ModelBuilder c;
  c.input("x", {2, 3}).output("z");
  c.node("Add", {"x", "w"}, {"v"}, "a");
  c.node("Relu", {"v"}, {"w"}, "b");
  c.node("Neg", {"w"}, {"z"}, "n");
  auto cyclic = import(c);
  ASSERT_FALSE(cyclic.isOk());
  EXPECT_NE(cyclic.error().message().find("cycle through node 'a'"), std::string::npos)
      << cyclic.error().message();
}

// Resize's scales or sizes become the output dims and the scale of each axis at import, by
// ONNX's rules (floor of length x scale; sizes' own ratio, or one scale under a policy);
// Upsample is asymmetric; tf_crop_and_resize is refused by name.
TEST(Importer, ResizeTakesItsSizesAndScalesAtImport) {
  {
    ModelBuilder b;
    b.input("x", {1, 2, 5, 7}).initializerFloats("scales", {4}, {1, 1, 0.6f, 2.5f}).output("y");
    auto& n = b.node("Resize", {"x", "", "scales"}, {"y"}, "r");
    addStringAttr(n, "mode", "linear");
    auto g = import(b);
    ASSERT_TRUE(g.isOk()) << g.error().message();
    const auto& a = std::get<ResizeAttrs>(g->nodes()[0].attrs);
    EXPECT_EQ(a.sizes, (std::vector<int64_t>{1, 2, 3, 17}));
    EXPECT_FLOAT_EQ(static_cast<float>(a.scales[2]), 0.6f);
    EXPECT_EQ(a.mode, ResizeMode::Linear);
    EXPECT_EQ(a.coordinates, ResizeCoordinates::HalfPixel);
  }
  {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 8}).initializerInts("sizes", {6, 6}).output("y");
    auto& n = b.node("Resize", {"x", "", "", "sizes"}, {"y"}, "r");
    addIntsAttr(n, "axes", {2, 3});
    addStringAttr(n, "keep_aspect_ratio_policy", "not_larger");
    auto g = import(b);
    ASSERT_TRUE(g.isOk()) << g.error().message();
    const auto& a = std::get<ResizeAttrs>(g->nodes()[0].attrs);
    EXPECT_EQ(a.sizes, (std::vector<int64_t>{1, 2, 3, 6})); // scale min(6/4, 6/8) = 0.75
    EXPECT_DOUBLE_EQ(a.scales[2], 0.75);
    EXPECT_DOUBLE_EQ(a.scales[3], 0.75);
  }
  {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).initializerFloats("scales", {4}, {1, 1, 2, 2}).output("y");
    b.node("Upsample", {"x", "scales"}, {"y"}, "u");
    auto g = import(b);
    ASSERT_TRUE(g.isOk()) << g.error().message();
    EXPECT_EQ(std::get<ResizeAttrs>(g->nodes()[0].attrs).coordinates,
              ResizeCoordinates::Asymmetric);
  }
  {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).initializerFloats("scales", {4}, {1, 1, 2, 2}).output("y");
    auto& n = b.node("Resize", {"x", "", "scales"}, {"y"}, "r");
    addStringAttr(n, "coordinate_transformation_mode", "tf_crop_and_resize");
    auto g = import(b);
    ASSERT_FALSE(g.isOk());
    EXPECT_NE(g.error().message().find("tf_crop_and_resize"), std::string::npos);
  }
}

// ConvTranspose imports as the convolution of its zero-spread input with its weights swapped and
// reversed, or, where its window is its stride (2x2, stride 2), as a 1x1 Conv whose channels
// are placed in the windows: equal to its definition (each input element scattering its window
// of weights) on random data, with groups, strides, dilations, pads and output_padding.
TEST(Importer, ConvTransposeEqualsItsDefinition) {
  struct Case {
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oph, opw;
  };
  for (const Case& t :
       {Case{3, 2, 2, 3, 1, 2, 1, 0, 2, 1, 1, 0}, Case{2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0},
        Case{2, 3, 2, 3, 1, 1, 0, 0, 0, 0, 0, 0}}) {
    SCOPED_TRACE("window " + std::to_string(t.kh) + "x" + std::to_string(t.kw) + ", stride " +
                 std::to_string(t.sh) + "x" + std::to_string(t.sw));
    const int64_t n = 2, c = 4, h = 3, w = 5, group = 2, mg = 3, kh = t.kh, kw = t.kw;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> wv(static_cast<size_t>(c * mg * kh * kw));
    for (float& v : wv) v = u(rng);
    std::vector<float> bias = {0.5f, -0.25f, 1.f, 0.f, 2.f, -1.f};
    ModelBuilder b;
    b.input("x", {n, c, h, w}).initializerFloats("w", {c, mg, kh, kw}, wv);
    b.initializerFloats("b", {group * mg}, bias).output("y");
    auto& node = b.node("ConvTranspose", {"x", "w", "b"}, {"y"}, "ct");
    addIntAttr(node, "group", group);
    addIntsAttr(node, "strides", {t.sh, t.sw});
    addIntsAttr(node, "dilations", {t.dh, t.dw});
    addIntsAttr(node, "pads", {t.pt, t.pl, t.pb, t.pr});
    addIntsAttr(node, "output_padding", {t.oph, t.opw});
    auto g = import(b);
    ASSERT_TRUE(g.isOk()) << g.error().message();
    const int64_t oh = t.sh * (h - 1) + t.oph + (kh - 1) * t.dh + 1 - t.pt - t.pb;
    const int64_t ow = t.sw * (w - 1) + t.opw + (kw - 1) * t.dw + 1 - t.pl - t.pr;
    Tensor x(DType::F32, Shape{n, c, h, w});
    for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, u(rng));
    auto y = runReference(*g, {x});
    ASSERT_TRUE(y.isOk()) << y.error().message();
    ASSERT_EQ((*y)[0].shape(), (Shape{n, group * mg, oh, ow}));
    std::vector<double> want(static_cast<size_t>(n * group * mg * oh * ow));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = bias[i / static_cast<size_t>(oh * ow) % static_cast<size_t>(group * mg)];
    for (int64_t b0 = 0; b0 < n; ++b0)
      for (int64_t ic = 0; ic < c; ++ic)
        for (int64_t iy = 0; iy < h; ++iy)
          for (int64_t ix = 0; ix < w; ++ix)
            for (int64_t o = 0; o < mg; ++o)
              for (int64_t ky = 0; ky < kh; ++ky)
                for (int64_t kx = 0; kx < kw; ++kx) {
                  const int64_t yy = iy * t.sh + ky * t.dh - t.pt,
                                xx = ix * t.sw + kx * t.dw - t.pl;
                  if (yy < 0 || yy >= oh || xx < 0 || xx >= ow) continue;
                  const int64_t m = ic / (c / group) * mg + o;
                  want[static_cast<size_t>(((b0 * group * mg + m) * oh + yy) * ow + xx)] +=
                      x.getDouble(((b0 * c + ic) * h + iy) * w + ix) *
                      wv[static_cast<size_t>(((ic * mg + o) * kh + ky) * kw + kx)];
                }
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR((*y)[0].getDouble(static_cast<int64_t>(i)), want[i], 1e-5) << i;
  }
}

TEST(Importer, ShapeArithmeticIsFoldedToConstants) {
  ModelBuilder b;
  b.input("x", {2, 3, 4}).initializerInts("idx", {0}).output("y");
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "idx"}, {"first"});
  b.initializerInts("rest", {-1});
  b.node("Concat", {"first", "rest"}, {"target"}).add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Reshape", {"x", "target"}, {"y"});
  auto g = import(b);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  ASSERT_EQ(g->nodes().size(), 1u); // only the Reshape is left
  EXPECT_EQ(g->value(g->outputs()[0]).type.shape, (Shape{2, 12}));
}

// A node with a missing or empty-named required input is an error naming the input, for every
// op (the ONNX schema says which are required), never an out-of-range read in a converter.
TEST(Importer, MissingAndEmptyRequiredInputsAreErrors) {
  struct Case {
    std::string op;
    std::vector<std::string> inputs;
    std::string want;
  };
  std::vector<Case> cases = {
      {"Conv", {"x"}, "input 1 ('W') is required but missing"},
      {"Conv", {"x", ""}, "input 1 ('W') is required but has an empty name"},
      {"MaxPool", {}, "input 0 ('X') is required but missing"},
      {"Clip", {}, "input 0 ('input') is required but missing"},
      {"Flatten", {""}, "input 0 ('input') is required but has an empty name"},
      {"Relu", {"x", "x"}, "Relu takes at most 1 inputs, not 2"},
      {"Gemm", {"x"}, "input 1 ('B') is required but missing"},
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).output("y");
    b.node(c.op, c.inputs, {"y"}, "bad");
    auto g = import(b);
    ASSERT_FALSE(g.isOk()) << c.op;
    EXPECT_NE(g.error().message().find(c.want), std::string::npos)
        << c.op << ": " << g.error().message();
    EXPECT_NE(g.error().message().find("'bad'"), std::string::npos) << g.error().message();
  }
}

// PyTorch exports Dropout's mask for a model in train mode with p = 0: in inference it is all
// true, a constant, and the Dropout itself is an identity.
TEST(Importer, DropoutWithItsMaskOutputImportsAsAnAllTrueMask) {
  ModelBuilder b;
  b.input("x", {2, 3}).output("y").output("mask");
  b.node("Dropout", {"x"}, {"y", "mask"}, "drop");
  auto g = import(b);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  ASSERT_EQ(g->outputs().size(), 2u);
  const Value& mask = g->value(g->outputs()[1]);
  ASSERT_TRUE(mask.constant.has_value());
  EXPECT_EQ(mask.type.dtype, DType::Bool);
  EXPECT_EQ(mask.type.shape, (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(mask.constant->getInt(i), 1);
  EXPECT_EQ(g->outputName(1), "mask");
}

// torchvision's ViT exported in training mode: Dropout(ratio 0, training_mode true) drops
// nothing, so it is the identity; any other ratio in training mode is refused, saying why.
TEST(Importer, TrainingModeDropoutWithRatioZeroIsTheIdentity) {
  for (double ratio : {0.0, 0.1}) {
    ModelBuilder b;
    b.input("x", {2, 3}).output("y").output("mask");
    b.initializerScalar("ratio", onnx::TensorProto::FLOAT, ratio)
        .initializerScalar("training", onnx::TensorProto::BOOL, 1);
    b.node("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, "drop");
    auto g = import(b);
    if (ratio != 0.0) {
      ASSERT_FALSE(g.isOk());
      EXPECT_NE(g.error().message().find("eval mode"), std::string::npos) << g.error().message();
      continue;
    }
    ASSERT_TRUE(g.isOk()) << g.error().message();
    ASSERT_EQ(g->outputs().size(), 2u);
    const Value& mask = g->value(g->outputs()[1]);
    ASSERT_TRUE(mask.constant.has_value());
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(mask.constant->getInt(i), 1);
  }
}

// The outputs a converter's expansion computes keep the model's names (DynamicQuantizeLinear's
// y_zero_point was written as its part's name).
TEST(Importer, DynamicQuantizeLinearOutputsKeepTheirGraphNames) {
  ModelBuilder b;
  b.input("x", {2, 3}).output("y").output("y_scale").output("y_zero_point");
  b.node("DynamicQuantizeLinear", {"x"}, {"y", "y_scale", "y_zero_point"}, "dql");
  auto g = import(b);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  ASSERT_EQ(g->outputs().size(), 3u);
  EXPECT_EQ(g->outputName(0), "y");
  EXPECT_EQ(g->outputName(1), "y_scale");
  EXPECT_EQ(g->outputName(2), "y_zero_point");
}

// Found by the ONNX fuzzer: an op over a dimension of a scalar indexed an empty shape.
TEST(Importer, AnAxisOfAScalarIsAnError) {
  for (const char* op : {"Concat", "Split", "Gather", "Squeeze", "ReduceSum", "ArgMax"}) {
    bool axesAttr = std::string(op) == "Squeeze" || std::string(op) == "ReduceSum";
    ModelBuilder b(axesAttr ? 11 : 13); // axes is an attribute before opset 13
    b.input("x", {}).initializerInts("idx", {0}).output("y");
    std::vector<std::string> in = {"x"};
    if (std::string(op) == "Concat") in = {"x", "x"};
    if (std::string(op) == "Gather") in = {"x", "idx"};
    auto& n = b.node(op, in, {"y"}, "scalar");
    if (axesAttr) {
      auto* a = n.add_attribute();
      a->set_name("axes");
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(0);
    } else {
      addIntAttr(n, "axis", 0);
    }
    auto g = import(b);
    ASSERT_FALSE(g.isOk()) << op;
    EXPECT_NE(g.error().message().find("names a dimension, but the input is a scalar"),
              std::string::npos)
        << op << ": " << g.error().message();
  }
}

TEST(Importer, ImpossibleAttributesAreErrors) {
  auto pool = [](std::vector<int64_t> pads) {
    ModelBuilder b;
    b.input("x", {1, 1, 6, 6}).output("y");
    auto& n = b.node("MaxPool", {"x"}, {"y"}, "pool");
    for (auto [name, values] :
         {std::pair{"kernel_shape", std::vector<int64_t>{3, 3}}, std::pair{"pads", pads}}) {
      auto* a = n.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : values) a->add_ints(v);
    }
    return import(b);
  };
  auto negative = pool({-1, 0, 0, 0});
  ASSERT_FALSE(negative.isOk());
  EXPECT_NE(negative.error().message().find("pad 0 is -1; a pad must be at least 0"),
            std::string::npos)
      << negative.error().message();
  auto wide = pool({0, 5, 0, 0});
  ASSERT_FALSE(wide.isOk());
  EXPECT_NE(wide.error().message().find("pad 1 is 5; a pad must be at least 0 and less than the "
                                        "kernel extent 3"),
            std::string::npos)
      << wide.error().message();
  EXPECT_TRUE(pool({1, 1, 1, 1}).isOk());

  ModelBuilder b;
  b.input("a", {2, 3}).input("b", {3, 4}).output("y");
  addIntAttr(b.node("Gemm", {"a", "b"}, {"y"}, "gemm"), "transB", 5);
  auto gemm = import(b);
  ASSERT_FALSE(gemm.isOk());
  EXPECT_NE(gemm.error().message().find("transB=5 must be 0 or 1"), std::string::npos)
      << gemm.error().message();
}

// A QLinearConv's bias of the wrong length or type is named as the user's input, with the shape
// it must have (not as a per-axis scale of a node of the expansion).
TEST(Importer, AQLinearConvBiasOfTheWrongLengthIsNamed) {
  for (const auto& [length, fine] : {std::pair{int64_t{3}, false}, std::pair{int64_t{2}, true}}) {
    ModelBuilder b;
    b.input("x", {1, 1, 4, 4}, onnx::TensorProto::UINT8).output("y");
    b.initializerScalar("s", onnx::TensorProto::FLOAT, 0.1);
    b.initializerScalar("z", onnx::TensorProto::UINT8, 3);
    b.initializerScalar("wz", onnx::TensorProto::INT8, 0);
    b.initializerInt8("w", {2, 1, 1, 1}, {5, -7});
    b.initializerInt32("bias", {length}, std::vector<int32_t>(static_cast<size_t>(length), 9));
    b.node("QLinearConv", {"x", "s", "z", "w", "s", "wz", "s", "z", "bias"}, {"y"}, "qconv");
    auto g = import(b);
    if (fine) {
      EXPECT_TRUE(g.isOk()) << g.error().message();
      continue;
    }
    ASSERT_FALSE(g.isOk());
    EXPECT_NE(g.error().message().find("QLinearConv's bias 'bias' is i32[3]: it must be an int32 "
                                       "vector of the weights' 2 output channels"),
              std::string::npos)
        << g.error().message();
  }
}

// The fuzzers' findings (tests/fuzz/regressions/onnx): each imports to an Error, not a crash.
TEST(Importer, FuzzerFindingsAreErrors) {
  std::string dir = std::string(TUNEC_SOURCE_DIR) + "/tests/fuzz/regressions/onnx";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    ImportOptions options;
    options.evaluator = runReferenceNode;
    auto g = importOnnxBytes(bytes, "/nonexistent", options);
    EXPECT_FALSE(g.isOk()) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 2);
}

TEST(Importer, ANameThatIsNotUtf8IsAnError) {
  ModelBuilder b;
  b.input("x", {4}).output("y");
  b.node("Relu", {"x"}, {"y"}, std::string("re\xFFlu"));
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(),
            "node name 're\\xFFlu' is not valid UTF-8 (a damaged model file?)");
}

TEST(Importer, AnOpsetNewerThanOnnxKnowsIsAnError) {
  ModelBuilder b(999);
  b.input("x", {4}).output("y");
  b.node("Relu", {"x"}, {"y"});
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.error().message().find("opset 999, newer than the newest"), std::string::npos)
      << g.error().message();
}

TEST(Importer, EveryUnsupportedOpIsListedInOneMessage) {
  ModelBuilder b;
  b.input("x", {4}).output("z");
  b.node("Frobnicate", {"x"}, {"a"}, "f1");
  b.node("Frobnicate", {"a"}, {"b"}, "f2");
  b.node("Quux", {"b"}, {"z"}, "q");
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(),
            "unsupported ops (2): Frobnicate (2 nodes, e.g. 'f1'), Quux (1 node, e.g. 'q'); see "
            "docs/ops.md for the supported set");
}

TEST(Importer, DynamicDimensionNamesInputAndFix) {
  ModelBuilder b;
  b.input("pixels", {-1, 3, 8, 8}, onnx::TensorProto::FLOAT, "batch").output("y");
  b.node("Relu", {"pixels"}, {"y"});
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(),
            "input 'pixels' has a dynamic dimension 'batch' (dim 0) without bounds: bound it with "
            "--dim batch=MIN..MAX (a symbolic compile), or fix it with --input-shape "
            "pixels=1x3x8x8");
  ImportOptions options;
  options.inputDims.shapes["pixels"] = Shape{2, 3, 8, 8};
  g = import(b, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  EXPECT_EQ(g->value(g->inputs()[0]).type.shape, (Shape{2, 3, 8, 8}));
  // --dim batch=1..8: a symbolic batch with its bound; MIN == MAX: a static dimension.
  options = {};
  options.inputDims.ranges["batch"] = {1, 8};
  g = import(b, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  EXPECT_EQ(g->value(g->inputs()[0]).type.shape.toString(), "batch x 3 x 8 x 8");
  EXPECT_EQ(g->value(g->outputs()[0]).type.shape.dim(0), Dim::symbol("batch", 1, 8));
  options.inputDims.ranges["batch"] = {4, 4};
  g = import(b, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  EXPECT_EQ(g->value(g->inputs()[0]).type.shape, (Shape{4, 3, 8, 8}));
}

TEST(Importer, DimFlagsNameAndBoundDynamicDimensions) {
  // input_ids [batch, <unnamed>]: the unnamed one is named by --dim input_ids:1=sequence.
  ModelBuilder b;
  b.inputDims("input_ids", {"batch", ""}, onnx::TensorProto::INT64).output("y");
  b.node("Identity", {"input_ids"}, {"y"});
  ImportOptions options;
  options.inputDims.ranges["batch"] = {1, 8};
  auto g = import(b, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(),
            "input 'input_ids' has a dynamic dimension unnamed (dim 1) without bounds: name it "
            "with --dim input_ids:1=NAME and bound it with --dim NAME=MIN..MAX (a symbolic "
            "compile), or fix it with --input-shape input_ids=1x1");
  options.inputDims.names[{"input_ids", 1}] = "sequence";
  options.inputDims.ranges["sequence"] = {1, 512};
  g = import(b, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  EXPECT_EQ(g->value(g->inputs()[0]).type.shape.toString(), "batch x sequence");
  EXPECT_EQ(g->value(g->inputs()[0]).type.shape.dims(), (std::vector<int64_t>{8, 512}));
  // A bound for a symbol the model does not have is a mistake, named.
  options.inputDims.ranges["seq"] = {1, 64};
  g = import(b, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(), "--dim seq=1..64 names no dynamic dimension of the model (its "
                                 "dynamic dimensions: batch, sequence)");
  options.inputDims.ranges.erase("seq");
  // So is a name for a dimension the model fixes, or for an input it does not have.
  options.inputDims.names[{"input_ids", 0}] = "b";
  ModelBuilder fixedBatch;
  fixedBatch.inputDims("input_ids", {"2", ""}, onnx::TensorProto::INT64).output("y");
  fixedBatch.node("Identity", {"input_ids"}, {"y"});
  g = import(fixedBatch, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(), "--dim input_ids:0=b names dimension 0 of 'input_ids', which "
                                 "the model fixes at 2");
  options.inputDims.names.clear();
  options.inputDims.names[{"ids", 1}] = "sequence";
  g = import(b, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(), "--dim ids:1=sequence names 'ids', which is not a model input "
                                 "(inputs: input_ids)");
}

TEST(Importer, SymbolsAreCarriedThroughABertLikeBlock) {
  // Embedding Gather, MatMul + bias, the scores' transpose and MatMul, Softmax, a LayerNorm's
  // ReduceMean: every shape keeps batch and sequence, sized at their bounds.
  ModelBuilder b;
  b.inputDims("ids", {"batch", "sequence"}, onnx::TensorProto::INT64).output("y").output("p");
  b.initializerFloats("table", {10, 4}, std::vector<float>(40, 0.5f));
  b.initializerFloats("w", {4, 4}, std::vector<float>(16, 0.25f));
  b.initializerFloats("bias", {4}, {1, 2, 3, 4});
  b.node("Gather", {"table", "ids"}, {"e"});
  b.node("MatMul", {"e", "w"}, {"h0"});
  b.node("Add", {"h0", "bias"}, {"h"});
  addIntsAttr(b.node("Transpose", {"h"}, {"ht"}), "perm", {0, 2, 1});
  b.node("MatMul", {"h", "ht"}, {"s"});
  addIntAttr(b.node("Softmax", {"s"}, {"p"}), "axis", -1);
  addIntsAttr(b.node("ReduceMean", {"h"}, {"y"}), "axes", {-1});
  ImportOptions options;
  options.inputDims.ranges = {{"batch", {1, 8}}, {"sequence", {1, 128}}};
  auto g = import(b, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  auto shapeOf = [&](const std::string& name) {
    for (const Value& v : g->values())
      if (v.name == name) return v.type.shape;
    return Shape();
  };
  EXPECT_EQ(shapeOf("e").toString(), "batch x sequence x 4");
  EXPECT_EQ(shapeOf("h").toString(), "batch x sequence x 4");
  EXPECT_EQ(shapeOf("ht").toString(), "batch x 4 x sequence");
  EXPECT_EQ(shapeOf("p").toString(), "batch x sequence x sequence");
  EXPECT_EQ(shapeOf("p").dims(), (std::vector<int64_t>{8, 128, 128}));
  EXPECT_EQ(shapeOf("y").toString(), "batch x sequence x 1");
}

TEST(Importer, ShapeArithmeticOnSymbolsIsFoldedIntoSymbolicShapes) {
  // x.view(batch, sequence, 4, 2) as exporters write it: Shape -> Gather -> Unsqueeze -> Concat
  // with the constant heads -> Reshape; then positions[:, :sequence] as Shape -> Gather ->
  // Unsqueeze -> Slice of a constant table.
  ModelBuilder b;
  b.inputDims("x", {"batch", "sequence", "8"}).output("y").output("p");
  b.initializerInts("zero", {0});
  b.initializerInts("one", {1});
  b.initializerInts("heads", {4, 2});
  b.initializerInts("table", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  b.node("Shape", {"x"}, {"shape"});
  b.node("Gather", {"shape", "zero"}, {"b1"});
  b.node("Gather", {"shape", "one"}, {"s1"});
  b.node("Concat", {"b1", "s1", "heads"}, {"target"}).add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Reshape", {"x", "target"}, {"y"});
  b.node("Slice", {"table", "zero", "s1", "zero"}, {"p"});
  ImportOptions options;
  options.inputDims.ranges = {{"batch", {1, 4}}, {"sequence", {1, 10}}};
  auto g = import(b, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  EXPECT_EQ(g->value(g->outputs()[0]).type.shape.toString(), "batch x sequence x 4 x 2");
  EXPECT_EQ(g->value(g->outputs()[1]).type.shape.toString(), "sequence");
  EXPECT_EQ(g->value(g->outputs()[1]).type.shape.dims(), (std::vector<int64_t>{10}));
  // A slice past the table for some values of the symbol is refused, naming the end.
  options.inputDims.ranges["sequence"] = {1, 11};
  g = import(b, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.error().message().find("a slice to the symbolic end sequence is compiled from 0 "
                                     "with step 1 within its axis only (here start 0, axis size "
                                     "10)"),
            std::string::npos)
      << g.error().message();
}

TEST(Importer, AShapeValueWhereTunecCannotCarryItIsAnErrorNamingIt) {
  ModelBuilder b;
  b.inputDims("x", {"batch", "8"}).output("s");
  b.node("Shape", {"x"}, {"s"}, "shape_of_x");
  ImportOptions options;
  options.inputDims.ranges["batch"] = {1, 8};
  auto g = import(b, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(),
            "graph output 's' is a shape computed from the symbolic dimensions [batch, 8]: tunec "
            "does not output shape values yet; fix the dimensions with --input-shape or --dim "
            "NAME=N..N");
  // Read by an op that takes no shape: named.
  ModelBuilder tile;
  tile.inputDims("x", {"batch", "8"}).output("y");
  tile.node("Shape", {"x"}, {"s"});
  tile.node("Tile", {"x", "s"}, {"y"}, "tile");
  g = import(tile, options);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(), "node 'tile' (Tile): reads 's', a shape computed from the "
                                 "symbolic dimensions [batch, 8], and tunec does not carry it "
                                 "through Tile yet: fix the dimensions with --input-shape or "
                                 "--dim NAME=N..N");
  // The static part of a shape still folds to a constant.
  ModelBuilder tail;
  tail.inputDims("x", {"batch", "8"}).output("y");
  addIntAttr(tail.node("Shape", {"x"}, {"s"}), "start", 1);
  tail.node("Reshape", {"x", "s"}, {"y"});
  options.inputDims.ranges["batch"] = {1, 1};
  g = import(tail, options);
  ASSERT_TRUE(g.isOk()) << g.error().message();
}

TEST(Importer, UnsupportedAttributeIsNamed) {
  ModelBuilder b;
  b.input("x", {4}).output("y");
  addIntAttr(b.node("Relu", {"x"}, {"y"}, "act"), "mystery", 1);
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(g.error().message(), "node 'act' (Relu): unsupported attribute 'mystery'");
}

TEST(Importer, NonConstantShapeInputExplainsStaticShapes) {
  ModelBuilder b;
  b.input("x", {2, 6}).input("shape", {2}, onnx::TensorProto::INT64).output("y");
  b.node("Reshape", {"x", "shape"}, {"y"}, "r");
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(
      g.error().message().find("node 'r' (Reshape): input 'shape' (the target shape) must be a "
                               "compile-time constant because tunec compiles static shapes"),
      std::string::npos)
      << g.error().message();
}

TEST(Importer, BadShapesAreReportedWithTheNode) {
  ModelBuilder b;
  b.input("a", {2, 3}).input("b", {4, 5}).output("c");
  b.node("MatMul", {"a", "b"}, {"c"}, "mm");
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_EQ(
      g.error().message(),
      "node 'mm' (MatMul) with inputs (f32[2x3], f32[4x5]): inner dimensions differ: 2x3 x 4x5");
}

TEST(Importer, TruncatedAndNonOnnxBytesAreRejected) {
  ModelBuilder b;
  b.input("x", {4}).output("y");
  b.node("Relu", {"x"}, {"y"});
  std::string bytes = b.bytes();
  auto g = importOnnxBytes(bytes.substr(0, bytes.size() / 2), "");
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.error().message().find("not an ONNX model"), std::string::npos);
  g = importOnnxBytes("hello, world", "");
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.error().message().find("not an ONNX model"), std::string::npos);
  auto f = importOnnxFile("/nonexistent/model.onnx");
  ASSERT_FALSE(f.isOk());
  EXPECT_EQ(f.error().message(), "/nonexistent/model.onnx: cannot open file");
}

TEST(Importer, ExternalDataNextToTheModelIsRead) {
  std::string dir = ::testing::TempDir() + "tunec_external_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<float> values = {1.5f, -2.f, 3.25f, 4.f};
  {
    std::ofstream bin(dir + "/weights.bin", std::ios::binary);
    bin.write("padding!", 8); // the tensor starts at offset 8
    bin.write(reinterpret_cast<const char*>(values.data()), 16);
  }
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [key, value] :
       {std::pair{"location", "weights.bin"}, {"offset", "8"}, {"length", "16"}}) {
    auto* kv = w->add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  }
  auto* node = g->add_node();
  node->set_op_type("Add");
  node->add_input("x");
  node->add_input("w");
  node->add_output("y");
  g->add_output()->set_name("y");
  std::string path = dir + "/external.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    model.SerializeToOstream(&f);
  }
  auto graph = importOnnxFile(path);
  ASSERT_TRUE(graph.isOk()) << graph.error().message();
  auto id = graph->findValue("w");
  ASSERT_TRUE(id.has_value());
  const Tensor& t = *graph->value(*id).constant;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.dataAs<float>()[i], values[static_cast<size_t>(i)]);
  // Hostile or broken external-data fields: each an error naming the tensor and the reason,
  // never an abort, a hang or a read outside the model's directory.
  auto withField = [&](const std::string& key, const std::string& value) {
    for (auto& kv : *w->mutable_external_data())
      if (kv.key() == key) kv.set_value(value);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    model.SerializeToOstream(&f);
  };
  auto expectError = [&](const std::string& want) {
    auto bad = importOnnxFile(path);
    ASSERT_FALSE(bad.isOk()) << want;
    EXPECT_NE(bad.error().message().find("initializer 'w': tensor 'w': "), std::string::npos)
        << bad.error().message();
    EXPECT_NE(bad.error().message().find(want), std::string::npos) << bad.error().message();
  };
  withField("offset", "eight");
  expectError("external data offset 'eight' is not a non-negative whole number");
  withField("offset", "99999999999999999999");
  expectError("external data offset '99999999999999999999' is not");
  withField("offset", "4096");
  expectError("has 24 bytes, fewer than offset 4096 + length 16");
  withField("offset", "8");
  withField("length", "9223372036854775807");
  expectError("external data length 9223372036854775807 is not the tensor's 16 bytes");
  withField("length", "16");
  withField("location", "/etc/passwd");
  expectError("external data location '/etc/passwd' must be a relative path");
  withField("location", "../weights.bin");
  expectError("external data location '../weights.bin' must be a relative path");
  std::filesystem::create_directory(dir + "/sub");
  withField("location", "sub");
  expectError("is not a regular file");
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  withField("location", "fifo");
  expectError("is not a regular file");
  std::filesystem::create_symlink("/etc/hostname", dir + "/link.bin");
  withField("location", "link.bin");
  expectError("external data location 'link.bin' leads outside the model's directory");
  // A missing external file names the tensor and the file.
  withField("location", "weights.bin");
  std::remove((dir + "/weights.bin").c_str());
  expectError("external data file");
  std::filesystem::remove_all(dir);
}

TEST(Importer, AutoPadSameUpperResolvesPads) {
  ModelBuilder b;
  b.input("x", {1, 1, 5, 5}).output("y");
  auto& n = b.node("MaxPool", {"x"}, {"y"});
  auto* k = n.add_attribute();
  k->set_name("kernel_shape");
  k->set_type(onnx::AttributeProto::INTS);
  k->add_ints(2);
  k->add_ints(2);
  auto* ap = n.add_attribute();
  ap->set_name("auto_pad");
  ap->set_type(onnx::AttributeProto::STRING);
  ap->set_s("SAME_UPPER");
  auto g = import(b);
  ASSERT_TRUE(g.isOk()) << g.error().message();
  EXPECT_EQ(std::get<PoolAttrs>(g->nodes()[0].attrs).pads, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(g->value(g->outputs()[0]).type.shape, (Shape{1, 1, 5, 5}));
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// ONNX Runtime's QOperator ops (com.microsoft) against their documented definition: each model
// against the same computation written with standard ONNX ops (DequantizeLinear, the float op,
// QuantizeLinear), both imported and run by the reference executor on random integers over the
// whole u8 range, zero points away from 0 and output scales that saturate: equal bit for bit.
struct QOperatorCase {
  std::string name;
  /// Writes the op under test (contrib) or its standard composition into the builder; the
  /// inputs "a", "b" (u8 [2, 6, 3, 3] or as the case makes them) and the parameters exist.
  std::function<void(ModelBuilder&, bool contrib)> body;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs; ///< u8 inputs
};

void quantParams(ModelBuilder& b) {
  b.initializerScalar("sa", onnx::TensorProto::FLOAT, 0.021);
  b.initializerScalar("za", onnx::TensorProto::UINT8, 131);
  b.initializerScalar("sb", onnx::TensorProto::FLOAT, 0.013);
  b.initializerScalar("zb", onnx::TensorProto::UINT8, 7);
  b.initializerScalar("sy", onnx::TensorProto::FLOAT, 0.017); // saturates some sums
  b.initializerScalar("zy", onnx::TensorProto::UINT8, 119);
}

// DQ(a), the float node, Q with (sy, zy): the standard composition.
void standard(ModelBuilder& b, const std::vector<std::pair<std::string, std::string>>& dq,
              const std::function<void(std::vector<std::string>)>& op) {
  std::vector<std::string> floats;
  for (const auto& [x, p] : dq) {
    b.node("DequantizeLinear", {x, "s" + p, "z" + p}, {x + "f"});
    floats.push_back(x + "f");
  }
  op(floats);
  b.node("QuantizeLinear", {"yf", "sy", "zy"}, {"y"});
}

TEST(Importer, QOperatorOpsEqualTheirStandardComposition) {
  const std::vector<int64_t> nchw = {2, 6, 3, 3};
  std::vector<QOperatorCase> cases = {
      {"QLinearAdd",
       [](ModelBuilder& b, bool contrib) {
         if (contrib)
           b.node("QLinearAdd", {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"y"})
               .set_domain("com.microsoft");
         else
           standard(b, {{"a", "a"}, {"b", "b"}}, [&](auto f) { b.node("Add", f, {"yf"}); });
       },
       {{"a", nchw}, {"b", {6, 1, 1}}}},
      {"QLinearMul",
       [](ModelBuilder& b, bool contrib) {
         if (contrib)
           b.node("QLinearMul", {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"y"})
               .set_domain("com.microsoft");
         else
           standard(b, {{"a", "a"}, {"b", "b"}}, [&](auto f) { b.node("Mul", f, {"yf"}); });
       },
       {{"a", nchw}, {"b", nchw}}},
      {"QLinearSigmoid",
       [](ModelBuilder& b, bool contrib) {
         if (contrib)
           b.node("QLinearSigmoid", {"a", "sa", "za", "sy", "zy"}, {"y"})
               .set_domain("com.microsoft");
         else
           standard(b, {{"a", "a"}}, [&](auto f) { b.node("Sigmoid", f, {"yf"}); });
       },
       {{"a", nchw}}},
      {"QLinearLeakyRelu",
       [](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("QLinearLeakyRelu", {"a", "sa", "za", "sy", "zy"}, {"y"});
           n.set_domain("com.microsoft");
           addFloatAttr(n, "alpha", 0.1f);
         } else {
           standard(b, {{"a", "a"}},
                    [&](auto f) { addFloatAttr(b.node("LeakyRelu", f, {"yf"}), "alpha", 0.1f); });
         }
       },
       {{"a", nchw}}},
      {"QLinearGlobalAveragePool",
       [](ModelBuilder& b, bool contrib) {
         if (contrib)
           b.node("QLinearGlobalAveragePool", {"a", "sa", "za", "sy", "zy"}, {"y"})
               .set_domain("com.microsoft");
         else
           standard(b, {{"a", "a"}}, [&](auto f) { b.node("GlobalAveragePool", f, {"yf"}); });
       },
       {{"a", nchw}}},
      {"QLinearGlobalAveragePool channels_last",
       [](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("QLinearGlobalAveragePool", {"a", "sa", "za", "sy", "zy"}, {"y"});
           n.set_domain("com.microsoft");
           addIntAttr(n, "channels_last", 1);
         } else {
           standard(b, {{"a", "a"}}, [&](auto f) {
             addIntsAttr(b.node("ReduceMean", f, {"yf"}), "axes", {1, 2});
           });
         }
       },
       {{"a", {2, 3, 3, 6}}}},
      {"QLinearAveragePool",
       [](ModelBuilder& b, bool contrib) {
         auto window = [](onnx::NodeProto& n) {
           addIntsAttr(n, "kernel_shape", {2, 2});
           addIntsAttr(n, "pads", {1, 1, 0, 0});
         };
         if (contrib) {
           auto& n = b.node("QLinearAveragePool", {"a", "sa", "za", "sy", "zy"}, {"y"});
           n.set_domain("com.microsoft");
           window(n);
         } else {
           standard(b, {{"a", "a"}}, [&](auto f) { window(b.node("AveragePool", f, {"yf"})); });
         }
       },
       {{"a", nchw}}},
      {"QLinearSoftmax",
       [](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("QLinearSoftmax", {"a", "sa", "za", "sy", "zy"}, {"y"});
           n.set_domain("com.microsoft");
           addIntAttr(n, "axis", -1);
           addIntAttr(n, "opset", 13);
         } else {
           standard(b, {{"a", "a"}},
                    [&](auto f) { addIntAttr(b.node("Softmax", f, {"yf"}), "axis", -1); });
         }
       },
       {{"a", nchw}}},
      {"QLinearConcat",
       [](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("QLinearConcat", {"sy", "zy", "a", "sa", "za", "b", "sb", "zb"}, {"y"});
           n.set_domain("com.microsoft");
           addIntAttr(n, "axis", 1);
         } else {
           standard(b, {{"a", "a"}, {"b", "b"}},
                    [&](auto f) { addIntAttr(b.node("Concat", f, {"yf"}), "axis", 1); });
         }
       },
       {{"a", nchw}, {"b", {2, 4, 3, 3}}}},
  };
  for (const QOperatorCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Graph> graphs;
    for (bool contrib : {true, false}) {
      ModelBuilder b(13);
      if (contrib) b.domain("com.microsoft", 1);
      for (const auto& [name, dims] : c.inputs) b.input(name, dims, onnx::TensorProto::UINT8);
      b.output("y");
      quantParams(b);
      c.body(b, contrib);
      auto g = import(b);
      ASSERT_TRUE(g.isOk()) << g.error().message();
      graphs.push_back(std::move(*g));
    }
    std::mt19937 rng(17);
    std::vector<Tensor> inputs;
    for (const auto& [name, dims] : c.inputs) {
      Tensor t(DType::U8, Shape(dims));
      for (int64_t i = 0; i < t.numel(); ++i) t.setInt(i, static_cast<int64_t>(rng() % 256));
      inputs.push_back(std::move(t));
    }
    auto want = runReference(graphs[1], inputs);
    auto got = runReference(graphs[0], inputs);
    ASSERT_TRUE(want.isOk() && got.isOk());
    ASSERT_EQ((*got)[0].dtype(), DType::U8);
    ASSERT_EQ((*got)[0].shape(), (*want)[0].shape());
    int saturated = 0;
    for (int64_t i = 0; i < (*want)[0].numel(); ++i) {
      ASSERT_EQ((*got)[0].getInt(i), (*want)[0].getInt(i)) << i;
      saturated += (*want)[0].getInt(i) == 0 || (*want)[0].getInt(i) == 255;
    }
    if (c.name == "QLinearAdd") {
      EXPECT_GT(saturated, 0); // the saturation was exercised
    }
  }
}

// QGemm (an int32 bias of the product's scale, B per output column, an f32 output when it has
// no output scale), MatMulIntegerToFloat and DynamicQuantizeMatMul import as their definitions:
// the dequantized product plus the bias, within f32 rounding of a hand computation.
TEST(Importer, QGemmAndTheIntegerToFloatMatmulsAreTheirDefinitions) {
  const int64_t m = 3, k = 5, n = 4;
  std::mt19937 rng(23);
  Tensor a(DType::U8, Shape{m, k});
  for (int64_t i = 0; i < a.numel(); ++i) a.setInt(i, static_cast<int64_t>(rng() % 256));
  std::vector<int8_t> w(static_cast<size_t>(n * k)); // [N, K] (transB) or [K, N]
  for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  const float sa = 0.02f, za = 128;
  const std::vector<float> sb = {0.01f, 0.02f, 0.005f, 0.03f};
  const std::vector<int32_t> bias = {100, -2000, 0, 4};
  for (const std::string op : {"QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul"}) {
    SCOPED_TRACE(op);
    ModelBuilder b(13);
    b.domain("com.microsoft", 1);
    const bool transB = op == "QGemm";
    b.input("a", {m, k},
            op == "DynamicQuantizeMatMul" ? onnx::TensorProto::FLOAT : onnx::TensorProto::UINT8);
    b.output("y");
    b.initializerScalar("sa", onnx::TensorProto::FLOAT, sa);
    b.initializerScalar("za", onnx::TensorProto::UINT8, za);
    b.initializerFloats("sb", {n}, sb);
    // B: int8 [N, K] for QGemm's transB, [K, N] otherwise; C: int32 [N].
    b.initializerInt8("w", transB ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, [&] {
      std::vector<int8_t> v(w.size());
      for (int64_t r = 0; r < k; ++r)
        for (int64_t c = 0; c < n; ++c)
          v[static_cast<size_t>(transB ? c * k + r : r * n + c)] =
              w[static_cast<size_t>(c * k + r)];
      return v;
    }());
    b.initializerInt32("c", {n}, bias);
    b.initializerFloats("fbias", {n}, {0.5f, -0.25f, 1.f, 0.f});
    if (op == "QGemm") {
      auto& node = b.node("QGemm", {"a", "sa", "za", "w", "sb", "", "c"}, {"y"});
      node.set_domain("com.microsoft");
      addIntAttr(node, "transB", 1);
    } else if (op == "MatMulIntegerToFloat") {
      b.node("MatMulIntegerToFloat", {"a", "w", "sa", "sb", "za", "", "fbias"}, {"y"})
          .set_domain("com.microsoft");
    } else {
      b.node("DynamicQuantizeMatMul", {"a", "w", "sb", "", "fbias"}, {"y"})
          .set_domain("com.microsoft");
    }
    auto g = import(b);
    ASSERT_TRUE(g.isOk()) << g.error().message();
    Tensor input = a;
    if (op == "DynamicQuantizeMatMul") { // f32 activations, quantized per run
      input = Tensor(DType::F32, Shape{m, k});
      for (int64_t i = 0; i < a.numel(); ++i) input.setDouble(i, (a.getInt(i) - za) * sa);
    }
    auto y = runReference(*g, {input});
    ASSERT_TRUE(y.isOk()) << y.error().message();
    ASSERT_EQ((*y)[0].dtype(), DType::F32);
    const std::vector<float> fbias = {0.5f, -0.25f, 1.f, 0.f};
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double sum = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          sum += (a.getInt(r * k + kk) - za) * sa * w[static_cast<size_t>(c * k + kk)] *
                 sb[static_cast<size_t>(c)];
        const double want =
            sum + (op == "QGemm" ? bias[static_cast<size_t>(c)] * sa * sb[static_cast<size_t>(c)]
                                 : fbias[static_cast<size_t>(c)]);
        // DynamicQuantizeMatMul requantizes A with its own range: within one step of A's scale.
        const double tol = op == "DynamicQuantizeMatMul" ? 0.05 * std::abs(want) + 0.05 : 1e-4;
        EXPECT_NEAR((*y)[0].getDouble(r * n + c), want, tol) << r << "," << c;
      }
  }
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// n floats uniform in [-range, range].
std::vector<float> randomFloats(std::mt19937& rng, size_t n, float range) {
  std::uniform_real_distribution<float> real(-range, range);
  std::vector<float> v(n);
  for (auto& x : v) x = real(rng);
  return v;
}

// The fused ops ONNX Runtime's transformer optimizer writes (com.microsoft) against their
// definitions written with standard ONNX ops, on random data: equal to f32 rounding. Each imports
// to ops tunec fuses (LayerNormalization, Gelu), and the skip normalizations' sum output is the
// sum they normalized.
TEST(Importer, TransformerOptimizerOpsEqualTheirDefinitions) {
  struct Case {
    std::string name;
    std::function<void(ModelBuilder&, bool contrib)> body;
  };
  std::vector<Case> cases = {
      {"Gelu",
       [&](ModelBuilder& b, bool contrib) {
         if (contrib)
           b.node("Gelu", {"x"}, {"y"}).set_domain("com.microsoft");
         else
           b.node("Gelu", {"x"}, {"y"});
         b.node("Identity", {"s"}, {"sum"});
       }},
      {"BiasGelu",
       [&](ModelBuilder& b, bool contrib) {
         if (contrib) {
           b.node("BiasGelu", {"x", "bias"}, {"y"}).set_domain("com.microsoft");
         } else {
           b.node("Add", {"x", "bias"}, {"xb"});
           b.node("Gelu", {"xb"}, {"y"});
         }
         b.node("Identity", {"s"}, {"sum"});
       }},
      {"FastGelu",
       [&](ModelBuilder& b, bool contrib) {
         if (contrib) {
           b.node("FastGelu", {"x", "bias"}, {"y"}).set_domain("com.microsoft");
         } else {
           b.node("Add", {"x", "bias"}, {"xb"});
           addStringAttr(b.node("Gelu", {"xb"}, {"y"}), "approximate", "tanh");
         }
         b.node("Identity", {"s"}, {"sum"});
       }},
      {"SkipLayerNormalization",
       [&](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("SkipLayerNormalization", {"x", "s", "gamma", "beta", "bias"},
                            {"y", "", "", "sum"});
           n.set_domain("com.microsoft");
           addFloatAttr(n, "epsilon", 1e-6f);
         } else {
           b.node("Add", {"x", "s"}, {"xs"});
           b.node("Add", {"xs", "bias"}, {"sum"});
           addFloatAttr(b.node("LayerNormalization", {"sum", "gamma", "beta"}, {"y"}), "epsilon",
                        1e-6f);
         }
       }},
      {"SkipSimplifiedLayerNormalization",
       [&](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("SkipSimplifiedLayerNormalization", {"x", "s", "gamma"},
                            {"y", "", "", "sum"});
           n.set_domain("com.microsoft");
           addFloatAttr(n, "epsilon", 1e-6f);
         } else {
           b.node("Add", {"x", "s"}, {"sum"});
           b.node("Mul", {"sum", "sum"}, {"sq"});
           addIntsAttr(b.node("ReduceMean", {"sq"}, {"ms"}), "axes", {-1});
           b.node("Add", {"ms", "eps"}, {"mse"});
           b.node("Sqrt", {"mse"}, {"rms"});
           b.node("Div", {"sum", "rms"}, {"n"});
           b.node("Mul", {"n", "gamma"}, {"y"});
         }
       }},
      {"SimplifiedLayerNormalization",
       [&](ModelBuilder& b, bool contrib) {
         if (contrib) {
           auto& n = b.node("SimplifiedLayerNormalization", {"x", "gamma"}, {"y"});
           n.set_domain("com.microsoft");
           addFloatAttr(n, "epsilon", 1e-6f);
         } else {
           b.node("Mul", {"x", "x"}, {"sq"});
           addIntsAttr(b.node("ReduceMean", {"sq"}, {"ms"}), "axes", {-1});
           b.node("Add", {"ms", "eps"}, {"mse"});
           b.node("Sqrt", {"mse"}, {"rms"});
           b.node("Div", {"x", "rms"}, {"n"});
           b.node("Mul", {"n", "gamma"}, {"y"});
         }
         b.node("Identity", {"s"}, {"sum"});
       }},
  };
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> real(-2.f, 2.f);
  auto floats = [&](size_t n) { return randomFloats(rng, n, 2.f); };
  const std::vector<float> gamma = floats(16), beta = floats(16), bias = floats(16);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Graph> graphs;
    for (bool contrib : {true, false}) {
      ModelBuilder b(17);
      if (contrib) b.domain("com.microsoft", 1);
      b.input("x", {2, 5, 16}).input("s", {2, 5, 16}).output("y").output("sum");
      b.initializerFloats("gamma", {16}, gamma).initializerFloats("beta", {16}, beta);
      b.initializerFloats("bias", {16}, bias).initializerFloats("eps", {}, {1e-6f});
      c.body(b, contrib);
      auto g = import(b);
      ASSERT_TRUE(g.isOk()) << g.error().message();
      graphs.push_back(std::move(*g));
    }
    Tensor x(DType::F32, Shape{2, 5, 16}), skip(DType::F32, Shape{2, 5, 16});
    for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, real(rng)), skip.setDouble(i, real(rng));
    auto got = runReference(graphs[0], {x, skip});
    auto want = runReference(graphs[1], {x, skip});
    ASSERT_TRUE(got.isOk() && want.isOk());
    for (size_t o = 0; o < 2; ++o)
      for (int64_t i = 0; i < (*want)[o].numel(); ++i)
        ASSERT_NEAR((*got)[o].getDouble(i), (*want)[o].getDouble(i), 2e-5) << o << ":" << i;
  }
  // The training outputs of a skip normalization are an error naming them.
  ModelBuilder b(17);
  b.domain("com.microsoft", 1);
  b.input("x", {2, 16}).input("s", {2, 16}).output("y").output("mean");
  b.initializerFloats("gamma", {16}, gamma);
  b.node("SkipLayerNormalization", {"x", "s", "gamma"}, {"y", "mean"}).set_domain("com.microsoft");
  auto g = import(b);
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.error().message().find("output 1 (mean) is read"), std::string::npos)
      << g.error().message();
}

} // namespace
} // namespace tunec

namespace tunec {
namespace {

// ONNX Runtime's optimized BERT form: EmbedLayerNormalization (word, position and segment
// embeddings, LayerNorm; mask_index the valid length of each row) then Attention (packed Q, K, V
// weights, 2 heads, the 1-d mask_index; and a raw 2-d 0/1 mask) equal a hand computation of
// their definitions within f32 rounding.
TEST(Importer, OptimizedBertEmbeddingAndAttentionAreTheirDefinitions) {
  const int64_t B = 2, S = 5, H = 8, N = 2, V = 11, P = 6, d = H / N;
  std::mt19937 rng(31);
  auto floats = [&](size_t n) { return randomFloats(rng, n, 1.f); };
  const auto word = floats(V * H), pos = floats(P * H), seg = floats(2 * H), gamma = floats(H),
             beta = floats(H), w = floats(H * 3 * H), bias = floats(3 * H);
  std::vector<int64_t> ids(B * S), types(B * S), mask(B * S);
  for (int64_t i = 0; i < B * S; ++i) {
    ids[static_cast<size_t>(i)] = static_cast<int64_t>(rng() % V);
    types[static_cast<size_t>(i)] = static_cast<int64_t>(rng() % 2);
    mask[static_cast<size_t>(i)] = i / S == 0 || i % S < 3; // row 1: 3 valid tokens
  }
  // The embeddings after LayerNorm (epsilon 1e-12), in double.
  std::vector<double> emb(B * S * H);
  for (int64_t t = 0; t < B * S; ++t) {
    double mean = 0, var = 0;
    std::vector<double> e(H);
    for (int64_t h = 0; h < H; ++h) {
      e[static_cast<size_t>(h)] = word[static_cast<size_t>(ids[static_cast<size_t>(t)] * H + h)] +
                                  pos[static_cast<size_t>((t % S) * H + h)] +
                                  seg[static_cast<size_t>(types[static_cast<size_t>(t)] * H + h)];
      mean += e[static_cast<size_t>(h)] / H;
    }
    for (double v : e) var += (v - mean) * (v - mean) / H;
    for (int64_t h = 0; h < H; ++h)
      emb[static_cast<size_t>(t * H + h)] = (e[static_cast<size_t>(h)] - mean) /
                                                std::sqrt(var + 1e-12) *
                                                gamma[static_cast<size_t>(h)] +
                                            beta[static_cast<size_t>(h)];
  }
  // Attention over the embeddings: keys past a row's valid length masked by -10000.
  std::vector<double> want(B * S * H);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n) {
      auto proj = [&](int64_t t, int64_t part, int64_t j) {
        double v = bias[static_cast<size_t>(part * H + n * d + j)];
        for (int64_t h = 0; h < H; ++h)
          v += emb[static_cast<size_t>((b * S + t) * H + h)] *
               w[static_cast<size_t>(h * 3 * H + part * H + n * d + j)];
        return v;
      };
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> p(S);
        double top = -1e30, total = 0;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t k = 0; k < d; ++k) dot += proj(i, 0, k) * proj(j, 1, k);
          p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(d)) +
                                      (mask[static_cast<size_t>(b * S + j)] ? 0.0 : -10000.0);
          top = std::max(top, p[static_cast<size_t>(j)]);
        }
        for (auto& v : p) total += v = std::exp(v - top);
        for (int64_t k = 0; k < d; ++k) {
          double out = 0;
          for (int64_t j = 0; j < S; ++j) out += p[static_cast<size_t>(j)] / total * proj(j, 2, k);
          want[static_cast<size_t>((b * S + i) * H + n * d + k)] = out;
        }
      }
    }
  for (bool rawMask : {false, true}) {
    SCOPED_TRACE(rawMask ? "a raw 2-d mask" : "EmbedLayerNormalization's mask_index");
    ModelBuilder mb(13);
    mb.domain("com.microsoft", 1);
    mb.input("ids", {B, S}, onnx::TensorProto::INT32)
        .input("types", {B, S}, onnx::TensorProto::INT32);
    mb.input("mask", {B, S}, onnx::TensorProto::INT32).output("y");
    mb.initializerFloats("word", {V, H}, word).initializerFloats("pos", {P, H}, pos);
    mb.initializerFloats("seg", {2, H}, seg).initializerFloats("gamma", {H}, gamma);
    mb.initializerFloats("beta", {H}, beta).initializerFloats("w", {H, 3 * H}, w);
    mb.initializerFloats("bias", {3 * H}, bias);
    auto& embed = mb.node("EmbedLayerNormalization",
                          {"ids", "types", "word", "pos", "seg", "gamma", "beta", "mask"},
                          {"emb", "mask_index"});
    embed.set_domain("com.microsoft");
    addFloatAttr(embed, "epsilon", 1e-12f);
    auto& attention =
        mb.node("Attention", {"emb", "w", "bias", rawMask ? "mask" : "mask_index"}, {"y"});
    attention.set_domain("com.microsoft");
    addIntAttr(attention, "num_heads", N);
    auto g = import(mb);
    ASSERT_TRUE(g.isOk()) << g.error().message();
    std::vector<Tensor> inputs;
    for (const auto* v : {&ids, &types, &mask}) {
      Tensor t(DType::I32, Shape{B, S});
      for (int64_t i = 0; i < B * S; ++i) t.setInt(i, (*v)[static_cast<size_t>(i)]);
      inputs.push_back(std::move(t));
    }
    auto y = runReference(*g, inputs);
    ASSERT_TRUE(y.isOk()) << y.error().message();
    for (int64_t i = 0; i < B * S * H; ++i)
      ASSERT_NEAR((*y)[0].getDouble(i), want[static_cast<size_t>(i)], 1e-4) << i;
  }
}

} // namespace
} // namespace tunec
