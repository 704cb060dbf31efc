// ORC LLJIT setup, the optimization pipelines (lean or O3), object emission for a Target.
#include "codegen/jit.h"

#include "codegen/module_builder.h"
#include "runtime/light_kernels.h"
#include "runtime/packing.h"
#include "runtime/parallel.h"
#include "runtime/tile_permission.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/Mangling.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/SubtargetFeature.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <mutex>
#include <set>
#include <sstream>

namespace tunec {

struct Jit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  Target target;
  std::vector<std::string> missingHere; ///< target features this CPU lacks (then: objects only)
  std::string cpu;
  std::string avx512Features; ///< the target's features
  std::string avx2Features;   ///< the target's features with every AVX-512 (and AMX) extension off
  std::unique_ptr<llvm::TargetMachine> machine;       ///< for the pipelines
  std::unique_ptr<llvm::TargetMachine> objectMachine; ///< PIC, for object emission
  std::mutex mutex;
  int counter = 0;
  JitPipeline pipeline = JitPipeline::Lean;
  bool twins = false;
};

namespace {

std::set<std::string> splitFeatures(const std::string& list) {
  std::set<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.insert(item[0] == '+' ? item.substr(1) : item);
  return out;
}

std::string llvmErrorText(llvm::Error error) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << error;
  return os.str();
}

void optimize(llvm::Module& module, llvm::TargetMachine& machine, JitPipeline pipeline) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&machine);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  if (pipeline == JitPipeline::O3) {
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(module, mam);
    return;
  }
  // The lean pipeline: the generated IR is already vectorized and register-tiled, so after
  // inlining the full-tile kernel only scalar clean-up and loop-invariant hoisting remain.
  llvm::ModulePassManager mpm =
      pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0); // always-inline
  llvm::FunctionPassManager fpm;
  fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
  fpm.addPass(llvm::EarlyCSEPass());
  fpm.addPass(llvm::InstCombinePass());
  fpm.addPass(llvm::SimplifyCFGPass());
  fpm.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()), true));
  mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  mpm.run(module, mam);
}

// TUNEC_DUMP_ASM=DIR: each module's assembly as DIR/<module>.s, for reading what a kernel became
// (emitted from a copy: code generation changes the IR).
void dumpAssembly(llvm::Module& module, llvm::TargetMachine& machine) {
  const char* dump = std::getenv("TUNEC_DUMP_ASM");
  if (!dump || !*dump) return; // set but empty: unset, as every TUNEC_ variable
  auto copy = llvm::CloneModule(module);
  std::string path = std::string(dump) + "/" + module.getModuleIdentifier() + ".s";
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  llvm::legacy::PassManager pm;
  if (ec || machine.addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_AssemblyFile))
    llvm::errs() << "tunec: TUNEC_DUMP_ASM: cannot write " << path << "\n";
  else
    pm.run(*copy);
}

Status verify(llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (llvm::verifyModule(module, &os))
    return makeError("internal: generated LLVM IR is invalid: ", os.str());
  return {};
}

} // namespace

Jit::Jit() : impl_(std::make_unique<Impl>()) {}
Jit::~Jit() = default;

Expected<std::unique_ptr<Jit>> Jit::create(const Target& target, JitPipeline pipeline,
                                           JitInstructions instructions) {
  if (!targetSupports(target, Isa::Avx2))
    return makeError("the target '", target.model,
                     "' lacks AVX2 and FMA, which tunec's kernels need");
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::unique_ptr<Jit> jit(new Jit());
  Impl& impl = *jit->impl_;
  impl.pipeline = pipeline;
  impl.target = target;
  impl.twins = instructions == JitInstructions::Twins;
  // The JIT runs code in this process, so it is built for this CPU; functions carry the
  // target's CPU and features as attributes, and object files are emitted for the target.
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return makeError("cannot detect the host target: ", llvmErrorText(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  llvm::StringMap<bool> hostFeatures;
  llvm::sys::getHostCPUFeatures(hostFeatures);
  std::set<std::string> targetLlvm = splitFeatures(target.llvmFeatures());
  // Twin code is plain IR: the twins stand in for the AMX, BF16 and VNNI instructions, and LLVM
  // legalizes the target's wide vectors to this CPU's, so a twin kernel for any target runs
  // here, with the target's vector width, tiles and arithmetic, on whatever this CPU has.
  if (impl.twins)
    std::erase_if(targetLlvm, [&](const std::string& f) { return !hostFeatures.lookup(f); });
  for (const std::string& f : targetLlvm)
    if (!hostFeatures.lookup(f)) impl.missingHere.push_back(f);
  // A CPU name LLVM does not know would be a warning a module and code for a generic CPU.
  if (!target.llvmCpu.empty() &&
      llvm::X86::parseArchX86(target.llvmCpu, /*Only64Bit=*/true) == llvm::X86::CK_None)
    return makeError("the target's cpu '", target.llvmCpu,
                     "' is not an x86-64 CPU LLVM 16 knows (such as znver4, sapphirerapids or ",
                     "x86-64-v4): correct the target file's 'cpu' field, or remove it and its ISA ",
                     "features decide");
  llvm::StringMap<bool> features;
  if (impl.missingHere.empty()) {
    // Runnable here: this CPU's features (so code for this machine is what LLVM makes for it),
    // less those of tunec's table that the target lacks.
    impl.cpu = target.llvmCpu.empty() ? jtmb->getCPU() : target.llvmCpu;
    features = hostFeatures;
    for (const std::string& f : splitFeatures(knownLlvmFeatures()))
      if (!targetLlvm.count(f)) features[f] = false;
  } else {
    // Another machine's target: the x86-64 level of its ISA, plus its features.
    impl.cpu = !target.llvmCpu.empty() ? target.llvmCpu
               : target.avx512f        ? "x86-64-v4"
                                       : "x86-64-v3";
    for (const std::string& f : targetLlvm) features[f] = true;
  }
  for (const auto& f : features) {
    std::string name = f.getKey().str();
    impl.avx512Features +=
        std::string(impl.avx512Features.empty() ? "" : ",") + (f.getValue() ? "+" : "-") + name;
    bool wide = name.rfind("avx512", 0) == 0 || name.rfind("amx", 0) == 0 || name == "evex512";
    impl.avx2Features += std::string(impl.avx2Features.empty() ? "" : ",") +
                         (f.getValue() && !wide ? "+" : "-") + name;
  }
  auto machine = jtmb->createTargetMachine();
  if (!machine)
    return makeError("cannot create the target machine: ", llvmErrorText(machine.takeError()));
  impl.machine = std::move(*machine);
  llvm::orc::JITTargetMachineBuilder pic = *jtmb;
  pic.setRelocationModel(llvm::Reloc::PIC_);
  if (!impl.missingHere.empty()) {
    pic.setCPU(impl.cpu);
    llvm::SubtargetFeatures objectFeatures;
    for (const std::string& f : targetLlvm) objectFeatures.AddFeature(f, true);
    pic.getFeatures() = objectFeatures;
  }
  auto objectMachine = pic.createTargetMachine();
  if (!objectMachine)
    return makeError("cannot create the target machine: ",
                     llvmErrorText(objectMachine.takeError()));
  impl.objectMachine = std::move(*objectMachine);
  auto lljit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!lljit) return makeError("cannot create the JIT: ", llvmErrorText(lljit.takeError()));
  impl.jit = std::move(*lljit);
  // Generated code calls the runtime (parallel_for, packing) in this process.
  auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl.jit->getDataLayout().getGlobalPrefix());
  if (!generator)
    return makeError("cannot expose process symbols to the JIT: ",
                     llvmErrorText(generator.takeError()));
  impl.jit->getMainJITDylib().addGenerator(std::move(*generator));
  // The runtime entry points are bound explicitly, so that they resolve whether or not the
  // executable exports its symbols.
  llvm::orc::MangleAndInterner mangle(impl.jit->getExecutionSession(), impl.jit->getDataLayout());
  llvm::orc::SymbolMap runtime;
  auto bind = [&](const char* name, auto* fn) {
    runtime[mangle(name)] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(reinterpret_cast<void*>(fn)),
                                 llvm::JITSymbolFlags::Exported);
  };
  bind("tunec_parallel_for", &tunec_parallel_for);
  bind("tunec_scratch", &tunec_scratch);
  bind("tunec_pack_a_f32", &tunec_pack_a_f32);
  bind("tunec_pack_b_f32", &tunec_pack_b_f32);
  bind("tunec_pack_a_f32_to_bf16", &tunec_pack_a_f32_to_bf16);
  bind("tunec_pack_b_bf16", &tunec_pack_b_bf16);
  bind("tunec_pack_b_f32_to_bf16_slots", &tunec_pack_b_f32_to_bf16_slots);
  bind("tunec_pack_b_bf16_slots", &tunec_pack_b_bf16_slots);
  bind("tunec_pack_a_bf16_tiles", &tunec_pack_a_bf16_tiles);
  bind("tunec_pack_a_u8_tiles", &tunec_pack_a_u8_tiles);
  bind("tunec_pad_nhwc_f32_to_bf16", &tunec_pad_nhwc_f32_to_bf16);
  bind("tunec_subsample_nhwc_f32_to_bf16", &tunec_subsample_nhwc_f32_to_bf16);
  bind("tunec_subsample_nhwc_u8", &tunec_subsample_nhwc_u8);
  bind("tunec_pad_nhwc_f32", &tunec_pad_nhwc_f32);
  bind("tunec_pad_to_nhwc_u8", &tunec_pad_to_nhwc_u8);
  bind("tunec_pad_nchw_to_nhwc_f32", &tunec_pad_nchw_to_nhwc_f32);
  bind("tunec_layer_norm_rows_f32", &tunec_layer_norm_rows_f32);
  if (auto err = impl.jit->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(runtime))))
    return makeError("cannot bind the runtime into the JIT: ", llvmErrorText(std::move(err)));
  // Tile instructions fault until the OS grants this process the tile state.
  if (!impl.twins && impl.missingHere.empty() && target.amx) TUNEC_TRY(requestAmxPermission());
  return jit;
}

std::unique_ptr<codegen::ModuleBuilder> Jit::newModule(Isa isa, const std::string& name) {
  std::lock_guard lock(impl_->mutex);
  const std::string& features = isa == Isa::Avx2 ? impl_->avx2Features : impl_->avx512Features;
  return std::make_unique<codegen::ModuleBuilder>(
      isa, impl_->target, name + "_m" + std::to_string(impl_->counter++), impl_->cpu, features,
      impl_->jit->getDataLayout(), impl_->jit->getTargetTriple().str(), impl_->twins);
}

const Target& Jit::target() const {
  return impl_->target;
}

Status Jit::addModule(std::unique_ptr<codegen::ModuleBuilder> module) {
  if (!impl_->missingHere.empty()) {
    std::string missing;
    for (const std::string& f : impl_->missingHere) missing += (missing.empty() ? "" : ", ") + f;
    return makeError("code for the target '", impl_->target.model,
                     "' cannot run on this CPU (it lacks ", missing,
                     "); compile it to model.so and run that on the target");
  }
  TUNEC_TRY(verify(module->module()));
  std::lock_guard lock(impl_->mutex);
  optimize(module->module(), *impl_->machine, impl_->pipeline);
  dumpAssembly(module->module(), *impl_->machine);
  llvm::orc::ThreadSafeModule tsm(module->takeModule(), module->takeContext());
  if (auto err = impl_->jit->addIRModule(std::move(tsm)))
    return makeError("JIT: ", llvmErrorText(std::move(err)));
  return {};
}

Expected<void*> Jit::lookup(const std::string& symbol) {
  std::lock_guard lock(impl_->mutex);
  auto address = impl_->jit->lookup(symbol);
  if (!address) return makeError("JIT: symbol ", symbol, ": ", llvmErrorText(address.takeError()));
  return address->toPtr<void*>();
}

Expected<void*> Jit::addAndLookup(std::unique_ptr<codegen::ModuleBuilder> module,
                                  const std::string& symbol) {
  TUNEC_TRY(addModule(std::move(module)));
  return lookup(symbol);
}

Status Jit::emitObject(std::unique_ptr<codegen::ModuleBuilder> module, const std::string& path) {
  if (impl_->twins)
    return makeError("internal: twin kernels are for tests and are never written to an object");
  TUNEC_TRY(verify(module->module()));
  std::lock_guard lock(impl_->mutex);
  optimize(module->module(), *impl_->machine, impl_->pipeline);
  dumpAssembly(module->module(), *impl_->objectMachine);
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) return makeError(path, ": cannot open for writing: ", ec.message());
  llvm::legacy::PassManager pm;
  if (impl_->objectMachine->addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_ObjectFile))
    return makeError("internal: the target cannot emit object files");
  pm.run(module->module());
  out.flush();
  if (out.has_error()) {
    // A full disk: report it as a value, or LLVM aborts with "IO failure on output stream".
    std::string why = out.error().message();
    out.clear_error();
    return makeError(path, ": cannot write the object file: ", why);
  }
  return {};
}

} // namespace tunec

namespace tunec::codegen {

std::string hostLlvmCpu() {
  return llvm::sys::getHostCPUName().str();
}

} // namespace tunec::codegen
