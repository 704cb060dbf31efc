// Internal to codegen: an LLVM module under construction for one ISA, with helpers that every
// emitter uses (function creation with target attributes, counted loops, vector types).
#pragma once

#include "templates/isa.h"

#include <functional>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <memory>
#include <string>

namespace tunec::codegen {

class ModuleBuilder {
public:
  ModuleBuilder(Isa isa, const std::string& name, std::string cpu, std::string features,
                const llvm::DataLayout& layout, const std::string& triple);

  Isa isa() const { return isa_; }
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
  /// <lanes x float> for this ISA.
  llvm::FixedVectorType* f32Vector() {
    return llvm::FixedVectorType::get(f32(), isaInfo(isa_).f32Lanes());
  }

  /// Emits `for (i = begin; i < end; i += step) body(i)` at the builder's insertion point; the
  /// builder is left after the loop. Values live across iterations must go through memory or be
  /// recomputed (the microkernel builds its own phi-carried loops).
  void forLoop(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end, int64_t step,
               const std::string& name, const std::function<void(llvm::Value*)>& body);

  /// Moves the context and module out (for the JIT).
  std::unique_ptr<llvm::LLVMContext> takeContext() { return std::move(context_); }
  std::unique_ptr<llvm::Module> takeModule() { return std::move(module_); }

private:
  Isa isa_;
  std::string cpu_;
  std::string features_;
  std::unique_ptr<llvm::LLVMContext> context_;
  std::unique_ptr<llvm::Module> module_;
};

} // namespace tunec::codegen
