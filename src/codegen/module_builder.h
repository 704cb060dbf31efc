// Internal to codegen: an LLVM module under construction for one ISA, with helpers that every
// emitter uses (function creation with target attributes, counted loops, vector types).
#pragma once

#include "runtime/kernel_args.h"
#include "support/dtype.h"
#include "templates/isa.h"

#include <array>
#include <functional>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tunec::codegen {

class ModuleBuilder {
public:
  ModuleBuilder(Isa isa, const Target& target, const std::string& name, std::string cpu,
                std::string features, const llvm::DataLayout& layout, const std::string& triple,
                bool twins = false);

  Isa isa() const { return isa_; }
  /// ISA-specific instructions are emitted as their twins (tile_ops.h; JitInstructions).
  bool twins() const { return twins_; }
  /// The machine the code is for (its caches decide prefetching; it outlives the builder).
  const Target& target() const { return target_; }
  llvm::LLVMContext& context() { return *context_; }
  llvm::Module& module() { return *module_; }
  /// Creates a function with external linkage and the ISA's target-cpu/target-features.
  llvm::Function* createFunction(const std::string& name, llvm::FunctionType* type,
                                 bool internal = false);
  /// Declares (or returns) an external C function.
  llvm::FunctionCallee declare(const std::string& name, llvm::FunctionType* type);

  llvm::Type* f32() { return llvm::Type::getFloatTy(*context_); }
  llvm::Type* i64() { return llvm::Type::getInt64Ty(*context_); }
  llvm::Type* i32() { return llvm::Type::getInt32Ty(*context_); }
  llvm::PointerType* ptr() { return llvm::PointerType::getUnqual(*context_); }
  /// How kernels hold an element of `type` in memory: float for f32, i16 for bf16 (its bits),
  /// i8 for u8 and i8 (the int8 GEMM's operands), i32 for i32.
  llvm::Type* storageType(DType type) {
    switch (type) {
    case DType::F32:
      return f32();
    case DType::BF16:
      return llvm::Type::getInt16Ty(*context_);
    case DType::U8:
    case DType::I8:
      return llvm::Type::getInt8Ty(*context_);
    case DType::I32:
      return i32();
    default:
      TUNEC_ASSERT(false, "no kernel stores " << dtypeName(type) << " elements");
    }
    return nullptr;
  }
  /// <lanes x float> for this ISA.
  llvm::FixedVectorType* f32Vector() {
    return llvm::FixedVectorType::get(f32(), isaInfo(isa_).f32Lanes());
  }

  /// Emits `for (i = begin; i < end; i += step) body(i)` at the builder's insertion point; the
  /// builder is left after the loop. Values live across iterations must go through memory or be
  /// recomputed (the microkernel builds its own phi-carried loops).
  void forLoop(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end, int64_t step,
               const std::string& name, const std::function<void(llvm::Value*)>& body);

  /// Calls variants[which], `which` = 2 * rowTail + columnTail (see tileVariant); variants equal
  /// to variants[0] are not given a case of their own.
  void emitVariantCall(llvm::IRBuilder<>& b, llvm::Value* which,
                       llvm::Function* const (&variants)[4], llvm::ArrayRef<llvm::Value*> args);
  /// The variant index of a tile: 2 * rowTail + columnTail (i1 values).
  llvm::Value* tileVariant(llvm::IRBuilder<>& b, llvm::Value* rowTail, llvm::Value* columnTail);
  /// Stores `fields` in a stack context and runs task(ctx, t) for t in [0, tasks): through the
  /// runtime's tunec_parallel_for on `threads` threads when tasks > 1, else by a direct call.
  /// As emitRunTasks for a task count known at run time (an extent of the run).
  void emitRunTasksDynamic(llvm::IRBuilder<>& b, llvm::Function* task,
                           llvm::ArrayRef<llvm::Value*> fields, llvm::Value* tasks, int threads);
  void emitRunTasks(llvm::IRBuilder<>& b, llvm::Function* task, llvm::ArrayRef<llvm::Value*> fields,
                    int64_t tasks, int threads);
  /// Creates task(ptr ctx, i64 t) with its entry block as the insertion point; the context's
  /// fields are loaded into `fields`.
  llvm::Function* beginTask(llvm::IRBuilder<>& b, const std::string& name, int numFields,
                            std::vector<llvm::Value*>& fields);
  /// Starts a kernel's entry function `name`, an rt::KernelFn (one rt::KernelArgs pointer), and
  /// returns its argument slots, loaded, in slot order (runtime/kernel_args.h).
  std::array<llvm::Value*, rt::kArgSlots> beginKernelEntry(llvm::IRBuilder<>& b,
                                                           const std::string& name);
  /// A call of the runtime's per-thread scratch buffer.
  llvm::Value* emitScratch(llvm::IRBuilder<>& b, int slot, int64_t bytes);
  /// Copies an N x H x W x C input of `type` into a zero-padded N x hp x wp x C scratch buffer
  /// (source at (padTop, padLeft)) and returns it; `extra` elements of slack follow the buffer.
  /// The runtime pads f32, and u8 with `padValue` (an int8 convolution's input zero point).
  /// `fromNchw`: the input is N x C x H x W, reordered while it is padded. `storedC` (u8): the
  /// copy's channels per pixel, c rounded up to quads, the extra ones padValue (0: c).
  /// `phases` > 1 (u8): each image's padded rows in that many planes, row y in plane y % phases
  /// (tunec_pad_to_nhwc_u8), each plane ceil(hp / phases) rows. `srcLd` (u8, NHWC): the
  /// source's pixel stride when it is a channel range of a wider tensor (0: c).
  llvm::Value* emitPaddedNhwc(llvm::IRBuilder<>& b, llvm::Value* in, int64_t n, int64_t h,
                              int64_t w, int64_t c, int64_t padTop, int64_t padLeft, int64_t hp,
                              int64_t wp, DType type, int64_t extra = 0, bool fromNchw = false,
                              int64_t padValue = 0, int64_t storedC = 0, int64_t phases = 1,
                              int64_t srcLd = 0);

  /// An NHWC input of f32 (rounded) or bf16 (as stored), pixels srcLd elements apart, as a
  /// zero-padded bf16 copy of N x hp x wp x C, the source at (padTop, padLeft): a bf16
  /// convolution's input; its rows in `phases` planes and `extra` elements of slack after it as
  /// emitPaddedNhwc's.
  llvm::Value* emitBf16Nhwc(llvm::IRBuilder<>& b, llvm::Value* in, DType from, int64_t srcLd,
                            int64_t n, int64_t h, int64_t w, int64_t c, int64_t padTop,
                            int64_t padLeft, int64_t hp, int64_t wp, int64_t extra = 0,
                            int64_t phases = 1);

  /// The pixels (y * sh, x * sw) of an NHWC input (pixels srcLd elements apart) as a dense copy
  /// (tunec_subsample_nhwc_*): bf16 rounded from an f32 input, or u8 and bf16 as stored; `extra`
  /// elements of slack after it.
  llvm::Value* emitSubsampledNhwc(llvm::IRBuilder<>& b, llvm::Value* in, DType from, int64_t srcLd,
                                  int64_t n, int64_t h, int64_t w, int64_t c, int64_t sh,
                                  int64_t sw, int64_t extra);

  /// Calls the runtime's copy `name`: void name(src, sizes..., dst), every size an i64.
  void emitCopyCall(llvm::IRBuilder<>& b, const std::string& name, llvm::Value* src,
                    const std::vector<int64_t>& sizes, llvm::Value* dst);

  /// Moves the context and module out (for the JIT).
  std::unique_ptr<llvm::LLVMContext> takeContext() { return std::move(context_); }
  std::unique_ptr<llvm::Module> takeModule() { return std::move(module_); }

private:
  /// The context array a task reads: `fields` stored in order (their count checked against the
  /// task's).
  llvm::Value* taskContext(llvm::IRBuilder<>& b, llvm::Function* task,
                           llvm::ArrayRef<llvm::Value*> fields);

  Isa isa_;
  bool twins_;
  const Target& target_;
  std::string cpu_;
  std::string features_;
  std::unique_ptr<llvm::LLVMContext> context_;
  std::unique_ptr<llvm::Module> module_;
  std::map<llvm::Function*, int> taskFields_; ///< context fields each task reads (checked)
};

/// The mask of the first `valid` of `lanes` vector lanes (a tail vector's masked loads and
/// stores); nullptr when there is no tail (valid <= 0 or valid >= lanes).
inline llvm::Constant* laneMask(llvm::IRBuilder<>& b, int lanes, int valid) {
  if (valid <= 0 || valid >= lanes) return nullptr;
  std::vector<llvm::Constant*> bits;
  for (int l = 0; l < lanes; ++l) bits.push_back(b.getInt1(l < valid));
  return llvm::ConstantVector::get(bits);
}

/// Base of the template emitters: the module, an IRBuilder and the short helpers every loop
/// nest uses.
class EmitterBase {
protected:
  explicit EmitterBase(ModuleBuilder& mb) : mb_(mb), b_(mb.context()) {}
  llvm::Value* i64(int64_t v) { return b_.getInt64(v); }
  /// Signed minimum of two i64 values.
  llvm::Value* min(llvm::Value* a, llvm::Value* b) {
    return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b);
  }
  /// Address of base[offset] for float elements.
  llvm::Value* gep(llvm::Value* base, llvm::Value* offset) {
    return b_.CreateGEP(mb_.f32(), base, offset);
  }
  /// Address of base[offset] for elements of `type`.
  llvm::Value* gep(DType type, llvm::Value* base, llvm::Value* offset) {
    return b_.CreateGEP(mb_.storageType(type), base, offset);
  }

  ModuleBuilder& mb_;
  llvm::IRBuilder<> b_;
};

} // namespace tunec::codegen
