# Helpers to compile CUDA sources with nvcc without CMake's CUDA language
# (no GPU and no driver here; we only need nvcc as a compiler).
set(WH_CUDA_HOME /usr/local/cuda CACHE PATH "CUDA toolkit")
set(WH_NVCC ${WH_CUDA_HOME}/bin/nvcc)
# The build compiles against NVIDIA's headers and builds its test programs
# with nvcc: both must be there before anything else is tried.
foreach(_need bin/nvcc include/cuda.h include/cublas_v2.h include/cufft.h include/curand.h include/cudnn.h)
  if(NOT EXISTS ${WH_CUDA_HOME}/${_need})
    message(FATAL_ERROR "Wormhole needs NVIDIA's CUDA 13.0 toolkit with cuDNN 9 (no GPU or driver): "
                        "${WH_CUDA_HOME}/${_need} is missing. Install the toolkit at /usr/local/cuda "
                        "(cuDNN's headers and libraries beside it), or pass -DWH_CUDA_HOME=DIR.")
  endif()
endforeach()
set(WH_CUDA_ARCH_FLAGS "" CACHE STRING "Extra nvcc -gencode flags for test programs")

# wh_nvcc_program(NAME SOURCES a.cu [b.cu] [LIBS -lcublas] [FLAGS ...] [OUTPUT path] [DEPENDS ...]
#                 [CUDART shared|static])
# Builds an executable with `nvcc -cudart shared` (or, with CUDART static,
# nvcc's default: the runtime linked in, reaching the driver through
# libcuda.so.1), as a user's program is built, into OUTPUT (default
# ${CMAKE_CURRENT_BINARY_DIR}/cuda-bin/NAME).
# Target NAME builds it; its WH_PATH property holds the path.
function(wh_nvcc_program name)
  cmake_parse_arguments(A "" "OUTPUT;CUDART" "SOURCES;LIBS;FLAGS;DEPENDS" ${ARGN})
  if(NOT A_CUDART)
    set(A_CUDART shared)
  endif()
  set(srcs "")
  foreach(s ${A_SOURCES})
    list(APPEND srcs ${CMAKE_CURRENT_SOURCE_DIR}/${s})
  endforeach()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/cuda-bin/${name})
  if(A_OUTPUT)
    set(out ${A_OUTPUT})
  endif()
  get_filename_component(outdir ${out} DIRECTORY)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${outdir}
    COMMAND ${WH_NVCC} -cudart ${A_CUDART} -O2 -std=c++17 ${WH_CUDA_ARCH_FLAGS} ${A_FLAGS}
            -I${PROJECT_SOURCE_DIR}/tests/include -o ${out} ${srcs} ${A_LIBS}
    DEPENDS ${srcs} ${A_DEPENDS} ${PROJECT_SOURCE_DIR}/tests/include/wh_check.cuh VERBATIM
    COMMENT "nvcc ${name}")
  add_custom_target(${name} ALL DEPENDS ${out})
  set_target_properties(${name} PROPERTIES WH_PATH ${out})
endfunction()

# wh_nvcc_ptx(OUT_VAR SRC [FLAGS ...]) -> plain PTX text (compute_80, uncompressed)
function(wh_nvcc_ptx outvar src)
  get_filename_component(base ${src} NAME_WE)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${base}.ptx)
  add_custom_command(OUTPUT ${out}
    COMMAND ${WH_NVCC} -O3 -ptx -gencode arch=compute_80,code=compute_80 ${ARGN}
            -o ${out} ${CMAKE_CURRENT_SOURCE_DIR}/${src}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} VERBATIM COMMENT "nvcc -ptx ${base}")
  set(${outvar} ${out} PARENT_SCOPE)
endfunction()

# wh_nvcc_fatbin(OUT_VAR SRC [FLAGS ...]) -> a default nvcc 13 fatbin
# (sm_75 SASS + zstd-compressed compute_75 PTX), as applications embed it.
function(wh_nvcc_fatbin outvar src)
  get_filename_component(base ${src} NAME_WE)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${base}.fatbin)
  add_custom_command(OUTPUT ${out}
    COMMAND ${WH_NVCC} -O3 -fatbin ${ARGN} -o ${out} ${CMAKE_CURRENT_SOURCE_DIR}/${src}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} VERBATIM COMMENT "nvcc -fatbin ${base}")
  set(${outvar} ${out} PARENT_SCOPE)
endfunction()
