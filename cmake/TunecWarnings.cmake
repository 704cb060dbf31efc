# One place for compiler warnings and sanitizers (Halide's set_halide_compiler_warnings).
option(TUNEC_WERROR "Treat compiler warnings as errors (on in CI)" OFF)
option(TUNEC_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

function(tunec_set_warnings target)
  # -Wno-restrict: GCC 12 false positive on std::string concatenation at -O3 (GCC PR 105329).
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter
                         $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>)
  if(TUNEC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(TUNEC_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# tunec_add_library(name SOURCES ... DEPS ...): one library per folder of the flow.
function(tunec_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  tunec_set_warnings(${name})
endfunction()
