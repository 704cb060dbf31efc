// The shape flags of one heavy kernel, shared by `tunec bench-op` and `tunec tune-op`.
#pragma once

#include "cli/arguments.h"
#include "templates/conv2d_template.h"
#include "templates/matmul_template.h"

#include <vector>

namespace tunec::cli {

/// --m --n --k --batch --trans-a --trans-b --runtime-b --lda --ldb --ldc --stride-a --stride-b
/// --stride-c, --ic --h --w --oc --kh --kw --stride
/// --pad --dilation --groups.
std::vector<FlagSpec> opShapeFlags();
/// An integer flag in [minimum, maximum]; `command` names the command in errors.
Expected<int64_t> intFlag(const Arguments& args, const std::string& name, int64_t fallback,
                          bool required, int64_t minimum = 1,
                          const std::string& command = "tunec bench-op",
                          int64_t maximum = int64_t{1} << 31);
Expected<MatmulWorkload> matmulFromFlags(const Arguments& args, int threads);
Expected<Conv2dWorkload> conv2dFromFlags(const Arguments& args, int threads);

} // namespace tunec::cli
