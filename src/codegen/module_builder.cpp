// ModuleBuilder: functions with target attributes and counted loops in LLVM IR.
#include "codegen/module_builder.h"

namespace tunec::codegen {

ModuleBuilder::ModuleBuilder(Isa isa, const Target& target, const std::string& name,
                             std::string cpu, std::string features, const llvm::DataLayout& layout,
                             const std::string& triple, bool twins)
    : isa_(isa), twins_(twins), target_(target), cpu_(std::move(cpu)),
      features_(std::move(features)), context_(std::make_unique<llvm::LLVMContext>()),
      module_(std::make_unique<llvm::Module>(name, *context_)) {
  module_->setDataLayout(layout);
  module_->setTargetTriple(triple);
}

llvm::Function* ModuleBuilder::createFunction(const std::string& name, llvm::FunctionType* type,
                                              bool internal) {
  auto* fn = llvm::Function::Create(
      type, internal ? llvm::Function::InternalLinkage : llvm::Function::ExternalLinkage, name,
      *module_);
  fn->addFnAttr("target-cpu", cpu_);
  fn->addFnAttr("target-features", features_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fn;
}

llvm::FunctionCallee ModuleBuilder::declare(const std::string& name, llvm::FunctionType* type) {
  return module_->getOrInsertFunction(name, type);
}

void ModuleBuilder::forLoop(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end,
                            int64_t step, const std::string& name,
                            const std::function<void(llvm::Value*)>& body) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(*context_, name + ".header", fn);
  auto* bodyBlock = llvm::BasicBlock::Create(*context_, name + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(*context_, name + ".exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* iv = b.CreatePHI(begin->getType(), 2, name);
  iv->addIncoming(begin, pre);
  b.CreateCondBr(b.CreateICmpSLT(iv, end), bodyBlock, exit);
  b.SetInsertPoint(bodyBlock);
  body(iv);
  llvm::Value* next =
      b.CreateAdd(iv, llvm::ConstantInt::get(begin->getType(), step), name + ".next");
  iv->addIncoming(next, b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
}

void ModuleBuilder::emitVariantCall(llvm::IRBuilder<>& b, llvm::Value* which,
                                    llvm::Function* const (&variants)[4],
                                    llvm::ArrayRef<llvm::Value*> args) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  auto* done = llvm::BasicBlock::Create(*context_, "tile.done", fn);
  auto* full = llvm::BasicBlock::Create(*context_, "tile.full", fn);
  llvm::SwitchInst* sw = b.CreateSwitch(which, full, 3);
  b.SetInsertPoint(full);
  b.CreateCall(variants[0], args);
  b.CreateBr(done);
  for (int v = 1; v < 4; ++v) {
    if (variants[v] == variants[0]) continue;
    auto* block = llvm::BasicBlock::Create(*context_, "tile.tail", fn);
    sw->addCase(b.getInt32(static_cast<uint32_t>(v)), block);
    b.SetInsertPoint(block);
    b.CreateCall(variants[v], args);
    b.CreateBr(done);
  }
  b.SetInsertPoint(done);
}

llvm::Value* ModuleBuilder::tileVariant(llvm::IRBuilder<>& b, llvm::Value* rowTail,
                                        llvm::Value* columnTail) {
  return b.CreateOr(b.CreateShl(b.CreateZExt(rowTail, i32()), 1), b.CreateZExt(columnTail, i32()));
}

void ModuleBuilder::emitRunTasks(llvm::IRBuilder<>& b, llvm::Function* task,
                                 llvm::ArrayRef<llvm::Value*> fields, int64_t tasks, int threads) {
  if (tasks > 1) {
    emitRunTasksDynamic(b, task, fields, b.getInt64(tasks), threads);
    return;
  }
  b.CreateCall(task, {taskContext(b, task, fields), b.getInt64(0)});
}

void ModuleBuilder::emitRunTasksDynamic(llvm::IRBuilder<>& b, llvm::Function* task,
                                        llvm::ArrayRef<llvm::Value*> fields, llvm::Value* tasks,
                                        int threads) {
  llvm::FunctionCallee pfor =
      declare("tunec_parallel_for",
              llvm::FunctionType::get(b.getVoidTy(), {ptr(), ptr(), i64(), i32()}, false));
  b.CreateCall(pfor, {task, taskContext(b, task, fields), tasks, b.getInt32(threads)});
}

llvm::Value* ModuleBuilder::taskContext(llvm::IRBuilder<>& b, llvm::Function* task,
                                        llvm::ArrayRef<llvm::Value*> fields) {
  auto declared = taskFields_.find(task);
  int reads = declared == taskFields_.end() ? -1 : declared->second;
  TUNEC_ASSERT(reads == static_cast<int>(fields.size()),
               "task " << task->getName().str() << " reads " << reads
                       << " context fields but is run with " << fields.size());
  llvm::Value* ctx = b.CreateAlloca(ptr(), b.getInt64(static_cast<int64_t>(fields.size())));
  for (size_t i = 0; i < fields.size(); ++i)
    b.CreateStore(fields[i], b.CreateGEP(ptr(), ctx, b.getInt64(static_cast<int64_t>(i))));
  return ctx;
}

llvm::Function* ModuleBuilder::beginTask(llvm::IRBuilder<>& b, const std::string& name,
                                         int numFields, std::vector<llvm::Value*>& fields) {
  auto* fnTy = llvm::FunctionType::get(b.getVoidTy(), {ptr(), i64()}, false);
  llvm::Function* fn = createFunction(name, fnTy, true);
  b.SetInsertPoint(llvm::BasicBlock::Create(*context_, "entry", fn));
  fields.clear();
  taskFields_[fn] = numFields;
  for (int i = 0; i < numFields; ++i)
    fields.push_back(b.CreateLoad(ptr(), b.CreateGEP(ptr(), fn->getArg(0), b.getInt64(i))));
  return fn;
}

std::array<llvm::Value*, rt::kArgSlots> ModuleBuilder::beginKernelEntry(llvm::IRBuilder<>& b,
                                                                        const std::string& name) {
  auto* fnTy = llvm::FunctionType::get(b.getVoidTy(), {ptr()}, false);
  llvm::Function* fn = createFunction(name, fnTy);
  b.SetInsertPoint(llvm::BasicBlock::Create(*context_, "entry", fn));
  std::array<llvm::Value*, rt::kArgSlots> slots{};
  for (int i = 0; i < rt::kArgSlots; ++i)
    slots[static_cast<size_t>(i)] =
        b.CreateLoad(ptr(), b.CreateGEP(ptr(), fn->getArg(0), b.getInt64(i)), "arg");
  return slots;
}

llvm::Value* ModuleBuilder::emitScratch(llvm::IRBuilder<>& b, int slot, int64_t bytes) {
  llvm::FunctionCallee scratch =
      declare("tunec_scratch", llvm::FunctionType::get(ptr(), {i32(), i64()}, false));
  return b.CreateCall(scratch, {b.getInt32(slot), b.getInt64(bytes)});
}

void ModuleBuilder::emitCopyCall(llvm::IRBuilder<>& b, const std::string& name, llvm::Value* src,
                                 const std::vector<int64_t>& sizes, llvm::Value* dst) {
  std::vector<llvm::Value*> args = {src};
  for (int64_t v : sizes) args.push_back(b.getInt64(v));
  args.push_back(dst);
  std::vector<llvm::Type*> types(args.size(), i64());
  types.front() = types.back() = ptr();
  b.CreateCall(declare(name, llvm::FunctionType::get(b.getVoidTy(), types, false)), args);
}

llvm::Value* ModuleBuilder::emitPaddedNhwc(llvm::IRBuilder<>& b, llvm::Value* in, int64_t n,
                                           int64_t h, int64_t w, int64_t c, int64_t padTop,
                                           int64_t padLeft, int64_t hp, int64_t wp, DType type,
                                           int64_t extra, bool fromNchw, int64_t padValue,
                                           int64_t storedC, int64_t phases, int64_t srcLd) {
  TUNEC_ASSERT(type == DType::F32 || type == DType::U8,
               "no padding helper for " << dtypeName(type));
  const int64_t cs = storedC ? storedC : c;
  TUNEC_ASSERT(cs == c || type == DType::U8, "only a u8 copy rounds its channels up");
  TUNEC_ASSERT((phases == 1 && !srcLd) || type == DType::U8,
               "only a u8 copy stores its rows in phases or reads a channel range");
  const int64_t rows = n * phases * ((hp + phases - 1) / phases);
  llvm::Value* padded =
      emitScratch(b, 2, (rows * wp * cs + extra) * static_cast<int64_t>(dtypeSize(type)));
  if (type == DType::U8) // an int8 convolution's input, padded with its zero point
    emitCopyCall(b, "tunec_pad_to_nhwc_u8", in,
                 {fromNchw ? 1 : 0, n, h, w, c, srcLd ? srcLd : c, cs, padTop, padLeft, hp, wp,
                  padValue, phases},
                 padded);
  else
    emitCopyCall(b, fromNchw ? "tunec_pad_nchw_to_nhwc_f32" : "tunec_pad_nhwc_f32", in,
                 {n, h, w, c, padTop, padLeft, hp, wp}, padded);
  return padded;
}

llvm::Value* ModuleBuilder::emitSubsampledNhwc(llvm::IRBuilder<>& b, llvm::Value* in, DType from,
                                               int64_t srcLd, int64_t n, int64_t h, int64_t w,
                                               int64_t c, int64_t sh, int64_t sw, int64_t extra) {
  TUNEC_ASSERT(from == DType::F32 || from == DType::U8 || from == DType::BF16,
               "no subsampling copy of " << dtypeName(from));
  const int64_t pixels = n * ((h - 1) / sh + 1) * ((w - 1) / sw + 1);
  llvm::Value* copy = emitScratch(b, 2, (pixels * c + extra) * (from == DType::U8 ? 1 : 2));
  if (from == DType::F32) {
    emitCopyCall(b, "tunec_subsample_nhwc_f32_to_bf16", in, {srcLd, n, h, w, c, sh, sw}, copy);
  } else { // u8 or bf16 pixels moved as they are: the byte copy of pixels of c elements
    const int64_t bytes = static_cast<int64_t>(dtypeSize(from));
    emitCopyCall(b, "tunec_subsample_nhwc_u8", in, {srcLd * bytes, n, h, w, c * bytes, sh, sw},
                 copy);
  }
  return copy;
}

llvm::Value* ModuleBuilder::emitBf16Nhwc(llvm::IRBuilder<>& b, llvm::Value* in, DType from,
                                         int64_t srcLd, int64_t n, int64_t h, int64_t w, int64_t c,
                                         int64_t padTop, int64_t padLeft, int64_t hp, int64_t wp,
                                         int64_t extra, int64_t phases) {
  TUNEC_ASSERT(from == DType::F32 || from == DType::BF16, "no bf16 copy of " << dtypeName(from));
  const int64_t rows = n * phases * ((hp + phases - 1) / phases);
  llvm::Value* copy = emitScratch(b, 2, (rows * wp * c + extra) * 2);
  if (from == DType::F32)
    emitCopyCall(b, "tunec_pad_nhwc_f32_to_bf16", in,
                 {srcLd, n, h, w, c, padTop, padLeft, hp, wp, phases}, copy);
  else // bf16 pixels padded as they are: the u8 copy of 2c-byte pixels, zero bytes being +0.0
    emitCopyCall(b, "tunec_pad_to_nhwc_u8", in,
                 {0, n, h, w, 2 * c, 2 * srcLd, 2 * c, padTop, padLeft, hp, wp, 0, phases}, copy);
  return copy;
}

} // namespace tunec::codegen
