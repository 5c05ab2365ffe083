# Shared by native/{cpu,cuda,metal}/CMakeLists.txt: adds the pinned llama.cpp
# source tree (static, PIC) and builds the Node addon target `svc_engine`.
# The including project sets SVC_BACKEND and the GGML_<backend> options first.

if(NOT DEFINED LLAMA_SRC_DIR OR NOT EXISTS "${LLAMA_SRC_DIR}/CMakeLists.txt")
  message(FATAL_ERROR "Pass -DLLAMA_SRC_DIR=<llama.cpp checkout> (got '${LLAMA_SRC_DIR}')")
endif()

set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()

# Everything is linked into one .node: static libs, position independent code.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(BUILD_SHARED_LIBS OFF CACHE BOOL "" FORCE)
set(GGML_BACKEND_DL OFF CACHE BOOL "" FORCE)
# Hidden visibility keeps llama/ggml symbols from clashing with other addons.
set(CMAKE_C_VISIBILITY_PRESET hidden)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
set(CMAKE_CUDA_VISIBILITY_PRESET hidden)
set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)

option(SVC_NATIVE "optimize for the build machine (GGML_NATIVE)" ON)
set(GGML_NATIVE ${SVC_NATIVE} CACHE BOOL "" FORCE)

# Library only: no tools, examples, tests, server, app, network or subprocess.
# SVC_REFERENCE_TOOLS adds llama.cpp's own llama-server/llama-bench targets to
# the same tree (not built by default) so benchmarks on an accelerator compare
# against binaries made from the very same compiled ggml, without a second
# multi-minute CUDA compile.
option(SVC_REFERENCE_TOOLS "also define llama-server and llama-bench targets" OFF)
set(LLAMA_BUILD_COMMON    ON  CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TESTS     OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TOOLS     ${SVC_REFERENCE_TOOLS} CACHE BOOL "" FORCE)
set(LLAMA_BUILD_EXAMPLES  OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_SERVER    ${SVC_REFERENCE_TOOLS} CACHE BOOL "" FORCE)
set(LLAMA_BUILD_APP       OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_MTMD      OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_UI        OFF CACHE BOOL "" FORCE)
set(LLAMA_USE_PREBUILT_UI OFF CACHE BOOL "" FORCE)
set(LLAMA_CURL            OFF CACHE BOOL "" FORCE)
set(LLAMA_OPENSSL         OFF CACHE BOOL "" FORCE)
set(LLAMA_SUBPROCESS      OFF CACHE BOOL "" FORCE)
set(LLAMA_LLGUIDANCE      OFF CACHE BOOL "" FORCE)
set(LLAMA_TOOLS_INSTALL   OFF CACHE BOOL "" FORCE)
set(LLAMA_TESTS_INSTALL   OFF CACHE BOOL "" FORCE)
set(LLAMA_ALL_WARNINGS    OFF CACHE BOOL "" FORCE)
set(GGML_BUILD_TESTS      OFF CACHE BOOL "" FORCE)
set(GGML_BUILD_EXAMPLES   OFF CACHE BOOL "" FORCE)

add_subdirectory("${LLAMA_SRC_DIR}" llama.cpp EXCLUDE_FROM_ALL)

set(SVC_SRC_DIR "${CMAKE_CURRENT_LIST_DIR}/src")
file(GLOB SVC_SOURCES CONFIGURE_DEPENDS "${SVC_SRC_DIR}/*.cpp")

add_library(svc_engine SHARED ${SVC_SOURCES} ${CMAKE_JS_SRC})
set_target_properties(svc_engine PROPERTIES PREFIX "" SUFFIX ".node")
target_include_directories(svc_engine PRIVATE ${CMAKE_JS_INC} "${SVC_SRC_DIR}")

# node-addon-api headers from the repo's node_modules.
execute_process(
  COMMAND node -p "require('node-addon-api').include"
  WORKING_DIRECTORY "${CMAKE_CURRENT_LIST_DIR}/.."
  OUTPUT_VARIABLE NODE_ADDON_API_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REPLACE "\"" "" NODE_ADDON_API_DIR "${NODE_ADDON_API_DIR}")
target_include_directories(svc_engine PRIVATE "${NODE_ADDON_API_DIR}")

target_compile_definitions(svc_engine PRIVATE
  NAPI_VERSION=8 NAPI_CPP_EXCEPTIONS NODE_ADDON_API_DISABLE_DEPRECATED
  SVC_BACKEND="${SVC_BACKEND}")
target_link_libraries(svc_engine PRIVATE llama llama-common ${CMAKE_JS_LIB})

if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  # Keep the static libs' symbols (and libstdc++ bits from them) private.
  target_link_options(svc_engine PRIVATE "-Wl,--exclude-libs,ALL")
endif()

if(MSVC AND CMAKE_JS_NODELIB_DEF AND CMAKE_JS_NODELIB_TARGET)
  execute_process(COMMAND ${CMAKE_AR} /def:${CMAKE_JS_NODELIB_DEF} /out:${CMAKE_JS_NODELIB_TARGET} ${CMAKE_STATIC_LINKER_FLAGS})
endif()
