// The two forms of a compiled model: in this process (JIT) or model.so (object + link).
#include "driver/compile_model.h"
#include "runtime/artifact_file.h"
#include "support/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tunec::driver {

namespace {

struct InProcess {
  std::shared_ptr<Jit> jit;
  std::vector<uint8_t> blob;
};

// Runs a program (found on PATH) with arguments; returns its exit status or an error.
Status runProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0)
    return makeError("cannot run '", argv[0], "': ", std::strerror(rc),
                     " (linking model.so needs a C compiler driver: apt-get install gcc)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return makeError("waiting for '", argv[0], "': ", std::strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return makeError("'", argv[0], "' failed (status ", status, ") while linking");
  return {};
}

} // namespace

Expected<std::unique_ptr<rt::ModelExecutor>> loadInProcess(CompiledModel model,
                                                           std::shared_ptr<Jit> jit, int threads) {
  TUNEC_ASSIGN_OR_RETURN(std::vector<void*> kernels, model.module->compile());
  auto owner = std::make_shared<InProcess>();
  owner->jit = std::move(jit);
  owner->blob = rt::serializeModel(model.plan, model.constants);
  std::vector<uint8_t>().swap(model.constants);
  TUNEC_ASSIGN_OR_RETURN(
      rt::ParsedModel parsed,
      rt::parseModel(owner->blob.data(), static_cast<int64_t>(owner->blob.size())));
  return rt::ModelExecutor::create(std::move(parsed), std::move(kernels), threads, owner);
}

Status writeSharedLibrary(CompiledModel model, const std::string& path,
                          const std::vector<std::string>& inputs) {
  TUNEC_TRY(checkOutputPath(path, inputs));
  std::vector<uint8_t> blob = rt::serializeModel(model.plan, model.constants);
  std::vector<uint8_t>().swap(model.constants);
  // The object and the linked library are staged in a private directory beside the output
  // (removed with it), so no name of theirs can be planted or redirected.
  TUNEC_ASSIGN_OR_RETURN(StagingDir dir, StagingDir::beside(path));
  std::string object = dir.file("model.o"), staging = dir.file("model.so");
  // Errors name the output, not the staged names inside the private directory.
  auto named = [&](const Error& e) {
    std::string m = e.message();
    for (const std::string* staged : {&object, &staging})
      for (size_t at; (at = m.find(*staged)) != std::string::npos;)
        m.replace(at, staged->size(), path);
    return Error(m);
  };
  if (Status s = model.module->emitObject(object, blob); !s) return named(s.error());
  std::vector<uint8_t>().swap(blob);
  // -z noexecstack: the object has no .note.GNU-stack section of its own.
  Status linked = runProgram({"cc", "-shared", "-o", staging, object, "-Wl,-z,noexecstack"});
  if (!linked) return named(linked.error().withContext(path));
  if (Status s = rt::appendArtifactTrailer(staging); !s) return named(s.error());
  // Durable before it replaces the old library: a crash leaves the old file or the new one.
  return dir.publish(staging, path);
}

} // namespace tunec::driver
