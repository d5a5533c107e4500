# wh_add_dropin(<target> OUTPUT_NAME <name> VERSION <soversion> TITLE <text>
#               REAL <NVIDIA's library> SOURCES <file>...
#               [STATUS <not-supported status>] [FORWARDS] [STUBS_REAL <library>])
#
# One drop-in library of the guest, from the calling folder's lib<name>.map
# (its exports, versioned like NVIDIA's) and compat.tsv (its notes for the
# compatibility table):
#   - built into build/guest-lib under NVIDIA's soname and installed with
#     the other drop-ins;
#   - STATUS: every other function REAL exports becomes a weak stub
#     (gen_weak_stubs.sh) that logs its name once and returns STATUS;
#   - FORWARDS: it reaches wormhole-server through the connection of
#     Wormhole's libcudart.so.13 (DT_NEEDED), found next to it first:
#     DT_RPATH $ORIGIN (old-style tags, searched before LD_LIBRARY_PATH), so
#     NVIDIA's libcudart on the library path is never bound in its place;
#   - a section of docs/compatibility.md (TITLE, REAL against the drop-in).
function(wh_add_dropin target)
  cmake_parse_arguments(D "FORWARDS" "OUTPUT_NAME;VERSION;TITLE;REAL;STATUS" "SOURCES" ${ARGN})
  set(map ${CMAKE_CURRENT_SOURCE_DIR}/lib${D_OUTPUT_NAME}.map)
  set(sources ${D_SOURCES})
  if(DEFINED D_STATUS)
    add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/stubs.c
      COMMAND ${CMAKE_SOURCE_DIR}/guest-lib/gen_weak_stubs.sh ${D_REAL} ${CMAKE_CURRENT_BINARY_DIR}/stubs.c
              wh_${target}_unsupported ${D_STATUS}
      DEPENDS ${CMAKE_SOURCE_DIR}/guest-lib/gen_weak_stubs.sh VERBATIM)
    set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/stubs.c PROPERTIES COMPILE_OPTIONS "-w")
    list(APPEND sources ${CMAKE_CURRENT_BINARY_DIR}/stubs.c)
  endif()
  add_library(${target} SHARED ${sources})
  # The guest tier: wormhole/guest_abi.h, library_call.hpp (cudart's include/).
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
    ${CMAKE_SOURCE_DIR}/guest-lib/cudart/include ${WH_CUDA_HOME}/include)
  target_link_options(${target} PRIVATE -Wl,--version-script=${map} -Wl,--no-undefined)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${D_OUTPUT_NAME} VERSION ${D_VERSION} SOVERSION ${D_VERSION}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/guest-lib
    LINK_DEPENDS ${map})
  if(D_FORWARDS)
    target_link_libraries(${target} PRIVATE wh_proto cudart)
    set_target_properties(${target} PROPERTIES BUILD_RPATH_USE_ORIGIN ON INSTALL_RPATH "$ORIGIN")
    target_link_options(${target} PRIVATE -Wl,--disable-new-dtags)
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${WH_INSTALL_GUESTLIBDIR})
  wh_compat_section("${D_TITLE}" ${D_REAL} ${target} ${CMAKE_CURRENT_SOURCE_DIR}/compat.tsv)
endfunction()

# One section of the compatibility table: NVIDIA's library against the
# drop-in target, with the drop-in's notes. Sections appear in the order
# the folders are configured (guest-lib, then libs/ by name).
function(wh_compat_section title real target notes)
  set_property(GLOBAL APPEND PROPERTY WH_COMPAT_ARGS "${title}" ${real} $<TARGET_FILE:${target}> ${notes})
  set_property(GLOBAL APPEND PROPERTY WH_COMPAT_DEPENDS ${target} ${notes})
endfunction()

# The table itself, once every drop-in is known: `make compat` copies it
# into docs/, and docs.compatibility_current fails while the committed one
# is stale.
function(wh_compat_table device_notes)
  get_property(args GLOBAL PROPERTY WH_COMPAT_ARGS)
  get_property(deps GLOBAL PROPERTY WH_COMPAT_DEPENDS)
  set(md ${CMAKE_BINARY_DIR}/docs/compatibility.md)
  add_custom_command(OUTPUT ${md}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/docs
    COMMAND ${CMAKE_SOURCE_DIR}/scripts/gen_compat.sh ${md} --device ${device_notes} ${args}
    DEPENDS ${deps} ${CMAKE_SOURCE_DIR}/scripts/gen_compat.sh ${device_notes}
    VERBATIM)
  add_custom_target(compat_table ALL DEPENDS ${md})
  add_test(NAME docs.compatibility_current
    COMMAND ${CMAKE_COMMAND} -E compare_files ${md} ${CMAKE_SOURCE_DIR}/docs/compatibility.md)
  set_tests_properties(docs.compatibility_current PROPERTIES LABELS docs)
endfunction()

# wh_add_library_slice([SERVICE <file>] [SIM <file>...] [CUDA <file>...])
#
# A forwarded library's folder (libs/<name>/, docs/ARCHITECTURE.md):
#   <name>_api.def   its spec, included by wormhole/proto/wire.hpp;
#   include/         what its parts share: wormhole/proto/ (guest and
#                    server), wormhole/server/ (the backend interface);
#   server/          SERVICE: its handlers and handle tables in the session;
#   sim/, cuda/      its bodies on the sim device and on a GPU;
#   guest/           the drop-in (wh_add_dropin), when it has one.
function(wh_add_library_slice)
  cmake_parse_arguments(S "" "SERVICE" "SIM;CUDA" ${ARGN})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  target_include_directories(wh_proto INTERFACE ${dir})
  if(EXISTS ${dir}/include)
    target_include_directories(wh_proto INTERFACE ${dir}/include)
  endif()
  if(S_SERVICE)
    target_sources(wh_session PRIVATE ${dir}/${S_SERVICE})
  endif()
  foreach(f ${S_SIM} ${S_CUDA})
    target_sources(wh_backend PRIVATE ${dir}/${f})
  endforeach()
  if(EXISTS ${dir}/guest/CMakeLists.txt)
    add_subdirectory(guest)
  endif()
endfunction()
