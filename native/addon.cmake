# What every svc addon shares (native/common.cmake for the engine, native/whisper for
# speech): one self-contained .node per addon, its ggml linked in statically with hidden
# symbols, so two addons in one process never share or clash over a symbol.

# Before add_subdirectory of the library: static, position independent, hidden symbols.
macro(svc_addon_defaults)
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  if(NOT CMAKE_BUILD_TYPE)
    set(CMAKE_BUILD_TYPE Release)
  endif()
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  set(BUILD_SHARED_LIBS OFF CACHE BOOL "" FORCE)
  set(GGML_BACKEND_DL OFF CACHE BOOL "" FORCE)
  set(CMAKE_C_VISIBILITY_PRESET hidden)
  set(CMAKE_CXX_VISIBILITY_PRESET hidden)
  set(CMAKE_CUDA_VISIBILITY_PRESET hidden)
  set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
  option(SVC_NATIVE "optimize for the build machine (GGML_NATIVE)" ON)
  set(GGML_NATIVE ${SVC_NATIVE} CACHE BOOL "" FORCE)
  set(GGML_BUILD_TESTS OFF CACHE BOOL "" FORCE)
  set(GGML_BUILD_EXAMPLES OFF CACHE BOOL "" FORCE)
endmacro()

# The addon target itself: a .node with node-addon-api (from the repo's node_modules) and
# the static libraries' symbols kept private.
function(svc_node_addon target)
  set_target_properties(${target} PROPERTIES PREFIX "" SUFFIX ".node")
  execute_process(
    COMMAND node -p "require('node-addon-api').include"
    WORKING_DIRECTORY "${CMAKE_CURRENT_FUNCTION_LIST_DIR}"
    OUTPUT_VARIABLE NODE_ADDON_API_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\"" "" NODE_ADDON_API_DIR "${NODE_ADDON_API_DIR}")
  target_include_directories(${target} PRIVATE ${CMAKE_JS_INC} "${NODE_ADDON_API_DIR}")
  target_compile_definitions(${target} PRIVATE NAPI_VERSION=8 NAPI_CPP_EXCEPTIONS NODE_ADDON_API_DISABLE_DEPRECATED)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # Keep the static libs' symbols (and libstdc++ bits from them) private.
    target_link_options(${target} PRIVATE "-Wl,--exclude-libs,ALL")
  endif()
  if(MSVC AND CMAKE_JS_NODELIB_DEF AND CMAKE_JS_NODELIB_TARGET)
    execute_process(COMMAND ${CMAKE_AR} /def:${CMAKE_JS_NODELIB_DEF} /out:${CMAKE_JS_NODELIB_TARGET} ${CMAKE_STATIC_LINKER_FLAGS})
  endif()
endfunction()
