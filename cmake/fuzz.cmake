# sublet — libFuzzer build (included right after the option() lines).
#
# -DSUBLET_FUZZ=ON (clang only) compiles everything with coverage
# instrumentation for libFuzzer plus ASan and UBSan; the fuzz targets
# themselves (fuzz/fuzz_*.c) are added at the end of CMakeLists.txt.
# scripts/fuzz configures and runs this build in build-fuzz/.
option(SUBLET_FUZZ "Build libFuzzer targets (clang)" OFF)

if(SUBLET_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SUBLET_FUZZ needs clang (CC=clang), not ${CMAKE_C_COMPILER_ID}: "
                        "libFuzzer ships with clang")
  endif()
  if(SUBLET_SANITIZE STREQUAL "thread")
    message(FATAL_ERROR "SUBLET_FUZZ uses ASan+UBSan; it cannot be combined with SUBLET_SANITIZE=thread")
  endif()
  set(SUBLET_FUZZ_SANITIZERS address,undefined)
  add_compile_options(-fsanitize=fuzzer-no-link,${SUBLET_FUZZ_SANITIZERS}
                      -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SUBLET_FUZZ_SANITIZERS})
endif()

# Called at the end of CMakeLists.txt: one executable per fuzz/fuzz_*.c, and
# (with the tests) one ctest per target that runs every input kept in
# fuzz/regressions/<target>/ and fuzz/seeds/<target>/ once.
function(sublet_add_fuzz_targets)
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/fuzz/fuzz_*.c)
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/fuzz)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer -Werror)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,${SUBLET_FUZZ_SANITIZERS})
    target_link_libraries(${name} PRIVATE sublet_static)
    if(SUBLET_BUILD_TESTS)
      add_test(NAME ${name}_regressions
               COMMAND bash ${PROJECT_SOURCE_DIR}/fuzz/replay.sh $<TARGET_FILE:${name}>
                       ${PROJECT_SOURCE_DIR}/fuzz/regressions/${name}
                       ${PROJECT_SOURCE_DIR}/fuzz/seeds/${name})
      set_tests_properties(${name}_regressions PROPERTIES
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1;SUBLET_ALLOC_CONF=;PYTORCH_CUDA_ALLOC_CONF=;PYTORCH_ALLOC_CONF="
        TIMEOUT 600)
    endif()
  endforeach()
endfunction()
