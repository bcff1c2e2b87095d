# Warnings and sanitizers for the project's own executables (never for the INTERFACE target).
function(specdec_configure_target target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  if(SPECDEC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(SPECDEC_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined,float-cast-overflow
                                             -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined,float-cast-overflow)
    # Tests may run fewer Monte-Carlo samples under the sanitizers (tests/support/stats.hpp).
    target_compile_definitions(${target} PRIVATE SPECDEC_SANITIZED_BUILD=1)
  endif()
endfunction()

# Release-grade flags for benchmarks, whatever the build type, for the CPU the benchmarks target
# (x86-64-v3 shows an AVX2-only machine's figures on an AVX-512 one).
set(SPECDEC_BENCH_MARCH native CACHE STRING "The -march of the benchmark executables")
function(specdec_add_benchmark name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE specdec::specdec benchmark::benchmark)
  target_compile_options(${name} PRIVATE -O3 -march=${SPECDEC_BENCH_MARCH})
  target_compile_definitions(${name} PRIVATE NDEBUG)
endfunction()
