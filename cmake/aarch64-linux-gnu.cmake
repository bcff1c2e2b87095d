# Cross build for 64-bit ARM Linux with Debian's cross compiler (g++-aarch64-linux-gnu); the tests
# run under qemu-user (ctest and Catch's test discovery go through CMAKE_CROSSCOMPILING_EMULATOR).
# The header-only dependencies (Eigen, Catch2, fmt in header-only mode) come from the host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Package configurations from the host too: only header-only packages are used from them.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The host's header-only libraries, each by its own link: the host's C headers stay out of the path.
set(specdec_host_headers ${CMAKE_BINARY_DIR}/host-headers)
foreach(lib fmt catch2)
  if(NOT EXISTS ${specdec_host_headers}/${lib})
    file(MAKE_DIRECTORY ${specdec_host_headers})
    file(CREATE_LINK /usr/include/${lib} ${specdec_host_headers}/${lib} SYMBOLIC)
  endif()
endforeach()
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES ${specdec_host_headers})
# No aarch64 libfmt: its headers compile it into each program.
set(SPECDEC_FMT_HEADER_ONLY ON CACHE BOOL "")
set(fmt_DIR /usr/lib/x86_64-linux-gnu/cmake/fmt CACHE PATH "")
