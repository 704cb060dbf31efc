// ModelModule: many template kernels in one module; the kernel table and the model blob as
// globals for the object form.
#include "codegen/model_module.h"

#include "codegen/kernel_emitters.h"
#include "codegen/module_builder.h"

#include <cstring>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>

namespace tunec {

ModelModule::ModelModule(Jit& jit, Isa isa)
    : jit_(jit), module_(jit.newModule(isa, "tunec_model")) {}
ModelModule::~ModelModule() = default;

std::string ModelModule::nextSymbol() const {
  // Unique within the JIT (the module identifier is), and readable in the object's symbols.
  return module_->module().getModuleIdentifier() + "_kernel" + std::to_string(symbols_.size());
}

template <typename Emit> Expected<int> ModelModule::add(Emit emit, codegen::PackedWeights& packed) {
  std::string symbol = nextSymbol();
  TUNEC_ASSIGN_OR_RETURN(codegen::PackedWeights p, emit(*module_, symbol));
  packed = std::move(p);
  symbols_.push_back(symbol);
  return kernelCount() - 1;
}

Expected<int> ModelModule::addMatmul(const MatmulWorkload& w, const MatmulConfig& c,
                                     const Epilogue& e, const float* constantB,
                                     codegen::PackedWeights& packed, RunTimeRows rows) {
  return add(
      [&](codegen::ModuleBuilder& mb, const std::string& symbol) {
        return codegen::emitMatmulKernel(mb, symbol, w, c, e, constantB, rows);
      },
      packed);
}

Expected<int> ModelModule::addAttention(const AttentionParts& parts) {
  codegen::PackedWeights none;
  return add(
      [&](codegen::ModuleBuilder& mb,
          const std::string& symbol) -> Expected<codegen::PackedWeights> {
        TUNEC_TRY(codegen::emitAttentionKernel(mb, symbol, parts));
        return codegen::PackedWeights{};
      },
      none);
}

Expected<int> ModelModule::addConv2d(const Conv2dWorkload& w, const Conv2dConfig& c,
                                     const Epilogue& e, const float* weights,
                                     codegen::PackedWeights& packed) {
  return add(
      [&](codegen::ModuleBuilder& mb, const std::string& symbol) {
        return codegen::emitConv2dKernel(mb, symbol, w, c, e, weights);
      },
      packed);
}

Expected<int> ModelModule::addDepthwise(const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                        const Epilogue& e, const float* weights,
                                        codegen::PackedWeights& packed) {
  return add(
      [&](codegen::ModuleBuilder& mb, const std::string& symbol) {
        return codegen::emitDepthwiseKernel(mb, symbol, w, c, e, weights);
      },
      packed);
}

Expected<std::vector<void*>> ModelModule::compile() {
  if (!module_) return makeError("internal: the model module was already consumed");
  TUNEC_TRY(jit_.addModule(std::move(module_)));
  std::vector<void*> entries;
  for (const std::string& symbol : symbols_) {
    TUNEC_ASSIGN_OR_RETURN(void* address, jit_.lookup(symbol));
    entries.push_back(address);
  }
  return entries;
}

Status ModelModule::emitObject(const std::string& path, const std::vector<uint8_t>& blob) {
  if (!module_) return makeError("internal: the model module was already consumed");
  llvm::Module& m = module_->module();
  llvm::LLVMContext& ctx = module_->context();
  auto* blobInit = llvm::ConstantDataArray::getRaw(
      llvm::StringRef(reinterpret_cast<const char*>(blob.data()), blob.size()), blob.size(),
      llvm::Type::getInt8Ty(ctx));
  auto* blobVar = new llvm::GlobalVariable(
      m, blobInit->getType(), true, llvm::GlobalValue::ExternalLinkage, blobInit, kModelBlobSymbol);
  blobVar->setAlignment(llvm::Align(64));
  // In a large-data section, which the linker places after everything else: the blob (gigabytes
  // of constants for a large model) then never lies between the code and the small data it
  // reaches by 32-bit offsets (crt's .bss and GOT: "relocation truncated to fit" beyond 2 GiB).
  // Only the runtime reads the blob, through its dynamic symbol.
  blobVar->setSection(".lrodata.tunec_model_blob");
  new llvm::GlobalVariable(m, module_->i64(), true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(module_->i64(), blob.size()),
                           kModelBlobSizeSymbol);
  std::vector<llvm::Constant*> entries;
  for (const std::string& symbol : symbols_) entries.push_back(m.getFunction(symbol));
  auto* tableTy = llvm::ArrayType::get(module_->ptr(), entries.size());
  new llvm::GlobalVariable(m, tableTy, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(tableTy, entries), kModelKernelsSymbol);
  new llvm::GlobalVariable(m, module_->i64(), true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(module_->i64(), entries.size()),
                           kModelKernelCountSymbol);
  return jit_.emitObject(std::move(module_), path);
}

} // namespace tunec
