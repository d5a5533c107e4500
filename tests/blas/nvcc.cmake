# wh_cu_program(NAME SOURCES a.cu ... [LIBS -lcublas] [FLAGS ...])
# Like cmake/WormholeCuda.cmake's wh_nvcc_program (nvcc -cudart shared, as a
# user builds), but its target is NAME_prog so that the target's phony path
# does not collide with the output file ${CMAKE_CURRENT_BINARY_DIR}/NAME under
# Ninja ("multiple rules generate ..."), which wh_nvcc_program runs into.
function(wh_cu_program name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS;FLAGS;DEPENDS" ${ARGN})
  set(srcs "")
  foreach(s ${A_SOURCES})
    list(APPEND srcs ${CMAKE_CURRENT_SOURCE_DIR}/${s})
  endforeach()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name})
  add_custom_command(OUTPUT ${out}
    COMMAND ${WH_NVCC} -cudart shared -O2 -std=c++17 ${WH_CUDA_ARCH_FLAGS} ${A_FLAGS}
            -o ${out} ${srcs} ${A_LIBS}
    DEPENDS ${srcs} ${A_DEPENDS} VERBATIM
    COMMENT "nvcc ${name}")
  add_custom_target(${name}_prog ALL DEPENDS ${out})
endfunction()
