# Shared by native/{cpu,cuda,metal}/CMakeLists.txt: adds the pinned llama.cpp
# source tree (static, PIC) and builds the Node addon target `svc_engine`.
# The including project sets SVC_BACKEND and the GGML_<backend> options first.

if(NOT DEFINED LLAMA_SRC_DIR OR NOT EXISTS "${LLAMA_SRC_DIR}/CMakeLists.txt")
  message(FATAL_ERROR "Pass -DLLAMA_SRC_DIR=<llama.cpp checkout> (got '${LLAMA_SRC_DIR}')")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/addon.cmake")
svc_addon_defaults()

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
# libmtmd (clip, stb_image): image input through a vision projector (native/src/vision.cpp).
set(LLAMA_BUILD_MTMD      ON  CACHE BOOL "" FORCE)
set(LLAMA_BUILD_UI        OFF CACHE BOOL "" FORCE)
set(LLAMA_USE_PREBUILT_UI OFF CACHE BOOL "" FORCE)
set(LLAMA_CURL            OFF CACHE BOOL "" FORCE)
set(LLAMA_OPENSSL         OFF CACHE BOOL "" FORCE)
set(LLAMA_SUBPROCESS      OFF CACHE BOOL "" FORCE)
set(LLAMA_LLGUIDANCE      OFF CACHE BOOL "" FORCE)
set(LLAMA_TOOLS_INSTALL   OFF CACHE BOOL "" FORCE)
set(LLAMA_TESTS_INSTALL   OFF CACHE BOOL "" FORCE)
set(LLAMA_ALL_WARNINGS    OFF CACHE BOOL "" FORCE)

add_subdirectory("${LLAMA_SRC_DIR}" llama.cpp EXCLUDE_FROM_ALL)

set(SVC_SRC_DIR "${CMAKE_CURRENT_LIST_DIR}/src")
file(GLOB SVC_SOURCES CONFIGURE_DEPENDS "${SVC_SRC_DIR}/*.cpp")

add_library(svc_engine SHARED ${SVC_SOURCES} ${CMAKE_JS_SRC})
svc_node_addon(svc_engine)
target_include_directories(svc_engine PRIVATE "${SVC_SRC_DIR}")
target_compile_definitions(svc_engine PRIVATE SVC_BACKEND="${SVC_BACKEND}")
target_link_libraries(svc_engine PRIVATE llama llama-common mtmd ${CMAKE_JS_LIB})
