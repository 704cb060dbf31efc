// ModuleBuilder: functions with target attributes and counted loops in LLVM IR.
#include "codegen/module_builder.h"

namespace tunec::codegen {

ModuleBuilder::ModuleBuilder(Isa isa, const std::string& name, std::string cpu,
                             std::string features, const llvm::DataLayout& layout,
                             const std::string& triple)
    : isa_(isa), cpu_(std::move(cpu)), features_(std::move(features)),
      context_(std::make_unique<llvm::LLVMContext>()),
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

} // namespace tunec::codegen
