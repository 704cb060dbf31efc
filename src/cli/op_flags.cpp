// Shape flags of matmul and conv2d workloads.
#include "cli/op_flags.h"

#include "cli/flag_values.h"

#include <cstdlib>
#include <tuple>

namespace tunec::cli {

std::vector<FlagSpec> opShapeFlags() {
  return {
      {"m", "M", "matmul: rows of A and C"},
      {"n", "N", "matmul: columns of B and C; conv2d: batch"},
      {"k", "K", "matmul: inner dimension"},
      {"batch", "B", "matmul: batch count (default 1)"},
      {"trans-a", "", "matmul: A is stored K x M"},
      {"trans-b", "", "matmul: B is stored N x K"},
      {"runtime-b", "", "matmul: B is an activation packed at run time, not a pre-packed constant"},
      {"b-per-batch", "", "matmul: with --runtime-b, one B per batch (attention) instead of one"},
      {"lda", "L", "matmul: distance between stored rows of A (default dense)"},
      {"ldb", "L", "matmul: the same for a runtime B"},
      {"ldc", "L", "matmul: the same for C"},
      {"stride-a", "S", "matmul: distance between batches of A (default dense; heads: --k)"},
      {"stride-b", "S", "matmul: the same for a runtime B"},
      {"stride-c", "S", "matmul: the same for C"},
      {"ic", "C", "conv2d: input channels"},
      {"h", "H", "conv2d: input height"},
      {"w", "W", "conv2d: input width"},
      {"oc", "C", "conv2d: output channels"},
      {"kh", "K", "conv2d: kernel height"},
      {"kw", "K", "conv2d: kernel width"},
      {"stride", "S", "conv2d: stride (default 1)"},
      {"pad", "P", "conv2d: padding on every side (default 0)"},
      {"dilation", "D", "conv2d: dilation (default 1)"},
      {"groups", "G", "conv2d: groups (default 1)"},
      {"dtype", "f32|bf16|u8s8",
       "matmul: element type of A, B and C (default f32; bf16: vdpbf16ps or AMX, f32 "
       "accumulation; u8s8: u8 A, s8 B, i32 sums, f32 C, on AMX's tdpbusd, AVX512-VNNI's "
       "vpdpbusd or AVX2's vpmaddubsw with 7-bit weights); "
       "conv2d: bf16 rounds the input and weights to bf16, f32 output; u8s8: u8 input, s8 "
       "weights, i32 sums, f32 output (AMX where the channels fill tile rows)"},
      {"src", "f32|bf16",
       "matmul: element type of A when it differs from --dtype (bf16 weights with an f32 A: the "
       "kernel rounds A to bf16 per block, as --precision bf16 builds do)"},
      {"dst", "f32|bf16", "matmul: element type of C when it differs from --dtype"},
      {"cold-weights", "",
       "constant weights come from memory, as in a model whose weights exceed the L3: evicted "
       "before every timed run (part of the workload key)"},
  };
}

Expected<int64_t> intFlag(const Arguments& args, const std::string& name, int64_t fallback,
                          bool required, int64_t minimum, const std::string& command,
                          int64_t maximum) {
  if (!args.has(name)) {
    if (required) return makeError(command, ": --", name, " is required");
    return fallback;
  }
  auto v = parseInteger(name, args.get(name), minimum, maximum);
  if (!v) return makeError(command, ": ", v.error().message());
  return *v;
}

Expected<MatmulWorkload> matmulFromFlags(const Arguments& args, int threads) {
  MatmulWorkload w;
  for (auto [flag, field, required] : {std::tuple{"m", &w.m, true},
                                       {"n", &w.n, true},
                                       {"k", &w.k, true},
                                       {"batch", &w.batch, false}}) {
    TUNEC_ASSIGN_OR_RETURN(*field, intFlag(args, flag, 1, required));
  }
  for (auto [flag, field] : {std::pair{"lda", &w.lda},
                             {"ldb", &w.ldb},
                             {"ldc", &w.ldc},
                             {"stride-a", &w.strideA},
                             {"stride-b", &w.strideB},
                             {"stride-c", &w.strideC}}) {
    TUNEC_ASSIGN_OR_RETURN(*field, intFlag(args, flag, 0, false, 0));
  }
  w.threads = threads;
  w.transA = args.has("trans-a");
  w.transB = args.has("trans-b");
  w.constantB = !args.has("runtime-b");
  w.broadcastB = !args.has("b-per-batch");
  w.coldWeights = args.has("cold-weights");
  if (!w.broadcastB && w.constantB)
    return makeError("tunec bench-op: --b-per-batch needs --runtime-b");
  for (auto [flag, fallback] :
       {std::pair{"dtype", "f32"}, std::pair{"src", ""}, std::pair{"dst", ""}}) {
    std::string name = args.has(flag) ? args.get(flag) : fallback;
    if (name.empty()) continue;
    if (std::string(flag) == "dtype" && name == "u8s8") {
      w.types = {DType::U8, DType::I8, DType::I32, DType::F32};
      continue;
    }
    if (isInt8Gemm(w.types))
      return makeError("--", flag, " cannot change the types of --dtype u8s8 (u8 A, f32 C)");
    if (name != "f32" && name != "bf16")
      return makeError("--", flag, " must be f32 or bf16, not '", name, "'");
    DType t = name == "bf16" ? DType::BF16 : DType::F32;
    if (std::string(flag) == "dtype")
      w.types = {t, t, DType::F32, t};
    else if (std::string(flag) == "src")
      w.types.src = t;
    else
      w.types.dst = t;
  }
  TUNEC_TRY(w.check());
  return w;
}

Expected<Conv2dWorkload> conv2dFromFlags(const Arguments& args, int threads) {
  Conv2dWorkload w;
  for (auto [flag, field, required] : {std::tuple{"n", &w.n, false},
                                       {"ic", &w.ic, true},
                                       {"h", &w.h, true},
                                       {"w", &w.w, true},
                                       {"oc", &w.oc, true},
                                       {"kh", &w.kh, true},
                                       {"kw", &w.kw, true}}) {
    TUNEC_ASSIGN_OR_RETURN(*field, intFlag(args, flag, 1, required));
  }
  TUNEC_ASSIGN_OR_RETURN(int64_t stride, intFlag(args, "stride", 1, false));
  TUNEC_ASSIGN_OR_RETURN(int64_t pad, intFlag(args, "pad", 0, false, 0));
  TUNEC_ASSIGN_OR_RETURN(int64_t dilation, intFlag(args, "dilation", 1, false));
  TUNEC_ASSIGN_OR_RETURN(w.groups, intFlag(args, "groups", 1, false));
  w.strideH = w.strideW = stride;
  w.padTop = w.padLeft = w.padBottom = w.padRight = pad;
  w.dilationH = w.dilationW = dilation;
  w.threads = threads;
  w.coldWeights = args.has("cold-weights");
  std::string dtype = args.get("dtype", "f32");
  if (dtype != "f32" && dtype != "bf16" && dtype != "u8s8")
    return makeError("--dtype must be f32, bf16 or u8s8, not '", dtype, "'");
  if (dtype == "bf16") // the bf16 convolution: f32 input rounded by the kernel, bf16 weights
    w.types = {DType::F32, DType::BF16, DType::F32, DType::F32};
  if (dtype == "u8s8") // the int8 convolution: u8 input, s8 weights, i32 sums, f32 out
    w.types = {DType::U8, DType::I8, DType::I32, DType::F32};
  TUNEC_TRY(w.check());
  return w;
}

} // namespace tunec::cli
