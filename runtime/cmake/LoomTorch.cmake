# Locates the LibTorch inside a PyTorch wheel and defines `loomrt::torch_cpu`,
# the CPU half of it (libtorch_cpu + libc10), and `loomrt::torch_cuda`, the
# CUDA half, when the wheel has one (LOOMRT_HAVE_CUDA).
#
# Why not `find_package(Torch)` and `${TORCH_LIBRARIES}`: the PyPI wheel is a
# CUDA build, so its TorchConfig.cmake (through Caffe2Config.cmake and
# public/cuda.cmake) requires a CUDA toolkit at configure time and stops with
# a FATAL_ERROR on machines without one, runs `enable_language(CUDA)` (nvcc),
# and puts the toolkit's own libnvrtc into TORCH_LIBRARIES. Here the toolkit
# is CUDA 13 while the wheel is built for CUDA 12.8 and loads its CUDA 12
# libraries from the `nvidia-*` wheels, so linking that libnvrtc would mix
# two CUDA versions in one process. The CPU runtime needs none of it: ATen,
# the dispatcher and every CPU kernel live in libtorch_cpu.so (whose RPATH
# finds its own dependencies), so we import exactly that and libc10.so. The
# CUDA backend imports libtorch_cuda/libc10_cuda the same way (below).
#
# The wheel is found, in order, from LOOMRT_TORCH_ROOT (the `torch` package
# directory), from Torch_DIR or a CMAKE_PREFIX_PATH entry holding
# Torch/TorchConfig.cmake (what `torch.utils.cmake_prefix_path` prints), or by
# asking LOOMRT_PYTHON (default: the repository's .venv) for it.

set(LOOMRT_PYTHON "${CMAKE_CURRENT_SOURCE_DIR}/../.venv/bin/python"
    CACHE FILEPATH "Python with torch, used to find LibTorch and by tests")
set(LOOMRT_TORCH_ROOT "" CACHE PATH
    "The torch package directory (holds include/ and lib/); found if empty")

function(_loomrt_torch_root_from_config_dir dir out)
  # <root>/share/cmake/Torch -> <root>
  get_filename_component(root "${dir}/../../.." ABSOLUTE)
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

if(NOT LOOMRT_TORCH_ROOT)
  set(_candidates)
  if(Torch_DIR)
    list(APPEND _candidates "${Torch_DIR}")
  endif()
  foreach(prefix IN LISTS CMAKE_PREFIX_PATH)
    list(APPEND _candidates "${prefix}/Torch" "${prefix}/share/cmake/Torch")
  endforeach()
  foreach(dir IN LISTS _candidates)
    if(EXISTS "${dir}/TorchConfig.cmake")
      _loomrt_torch_root_from_config_dir("${dir}" _root)
      set(LOOMRT_TORCH_ROOT "${_root}" CACHE PATH "" FORCE)
      break()
    endif()
  endforeach()
endif()

if(NOT LOOMRT_TORCH_ROOT AND EXISTS "${LOOMRT_PYTHON}")
  execute_process(
    COMMAND "${LOOMRT_PYTHON}" -c
            "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND EXISTS "${_prefix}/Torch/TorchConfig.cmake")
    _loomrt_torch_root_from_config_dir("${_prefix}/Torch" _root)
    set(LOOMRT_TORCH_ROOT "${_root}" CACHE PATH "" FORCE)
  endif()
endif()

if(NOT LOOMRT_TORCH_ROOT)
  message(FATAL_ERROR
    "loomrt: cannot find LibTorch. Pass "
    "-DCMAKE_PREFIX_PATH=$(.venv/bin/python -c 'import torch.utils; "
    "print(torch.utils.cmake_prefix_path)') or -DLOOMRT_TORCH_ROOT=<torch "
    "package directory>.")
endif()

set(_torch_cpu "${LOOMRT_TORCH_ROOT}/lib/libtorch_cpu.so")
set(_c10 "${LOOMRT_TORCH_ROOT}/lib/libc10.so")
foreach(f "${_torch_cpu}" "${_c10}" "${LOOMRT_TORCH_ROOT}/include/ATen/core/Tensor.h")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "loomrt: LOOMRT_TORCH_ROOT=${LOOMRT_TORCH_ROOT} has no ${f}")
  endif()
endforeach()

file(STRINGS "${LOOMRT_TORCH_ROOT}/include/torch/csrc/api/include/torch/version.h"
     _version_lines REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
set(LOOMRT_TORCH_VERSION "")
foreach(line IN LISTS _version_lines)
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" n "${line}")
  string(APPEND LOOMRT_TORCH_VERSION ".${n}")
endforeach()
string(SUBSTRING "${LOOMRT_TORCH_VERSION}" 1 -1 LOOMRT_TORCH_VERSION)
message(STATUS "loomrt: LibTorch ${LOOMRT_TORCH_VERSION} from ${LOOMRT_TORCH_ROOT}")

add_library(loomrt_c10 SHARED IMPORTED)
set_target_properties(loomrt_c10 PROPERTIES IMPORTED_LOCATION "${_c10}")

add_library(loomrt_torch_cpu SHARED IMPORTED)
set_target_properties(loomrt_torch_cpu PROPERTIES
  IMPORTED_LOCATION "${_torch_cpu}"
  INTERFACE_LINK_LIBRARIES loomrt_c10
  # SYSTEM: LibTorch's headers are not ours to warn about.
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES
    "${LOOMRT_TORCH_ROOT}/include;${LOOMRT_TORCH_ROOT}/include/torch/csrc/api/include"
  INTERFACE_INCLUDE_DIRECTORIES
    "${LOOMRT_TORCH_ROOT}/include;${LOOMRT_TORCH_ROOT}/include/torch/csrc/api/include"
  # PyTorch >= 2.7 wheels use the C++11 ABI (torch._C._GLIBCXX_USE_CXX11_ABI
  # is True for this wheel). Stating it keeps a build with an older default
  # from linking against std::string symbols that do not exist in the .so.
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
add_library(loomrt::torch_cpu ALIAS loomrt_torch_cpu)

# The CUDA half, `loomrt::torch_cuda`, whenever the wheel has one: its
# libtorch_cuda + libc10_cuda, the CUDA 12 runtime it loads from the
# `nvidia-cuda-runtime` wheel, and the headers of the `nvidia-*` wheels next
# to torch (ATen/cuda/CUDAContext.h includes cuBLAS', cuSPARSE's and
# cuSOLVER's; c10d's NCCLUtils.hpp includes nccl.h). No CUDA toolkit and no
# nvcc: the backend is host C++ calling ATen, c10 and c10d. LOOMRT_HAVE_CUDA
# says whether it was found (a CPU-only wheel has no libtorch_cuda.so).
get_filename_component(_site "${LOOMRT_TORCH_ROOT}/.." ABSOLUTE)
set(_nvidia "${_site}/nvidia")
set(_torch_cuda "${LOOMRT_TORCH_ROOT}/lib/libtorch_cuda.so")
set(_c10_cuda "${LOOMRT_TORCH_ROOT}/lib/libc10_cuda.so")
file(GLOB _cudart "${_nvidia}/cuda_runtime/lib/libcudart.so*")
set(LOOMRT_HAVE_CUDA OFF)
if(EXISTS "${_torch_cuda}" AND EXISTS "${_c10_cuda}" AND _cudart
   AND EXISTS "${_nvidia}/cuda_runtime/include/cuda_runtime_api.h"
   AND EXISTS "${_nvidia}/nccl/include/nccl.h")
  set(LOOMRT_HAVE_CUDA ON)
  list(GET _cudart 0 _cudart)
  file(GLOB _nvidia_includes LIST_DIRECTORIES true "${_nvidia}/*/include")
  add_library(loomrt_c10_cuda SHARED IMPORTED)
  set_target_properties(loomrt_c10_cuda PROPERTIES
    IMPORTED_LOCATION "${_c10_cuda}")
  add_library(loomrt_cudart SHARED IMPORTED)
  set_target_properties(loomrt_cudart PROPERTIES
    IMPORTED_LOCATION "${_cudart}")
  add_library(loomrt_torch_cuda SHARED IMPORTED)
  set_target_properties(loomrt_torch_cuda PROPERTIES
    IMPORTED_LOCATION "${_torch_cuda}"
    INTERFACE_LINK_LIBRARIES "loomrt_torch_cpu;loomrt_c10_cuda;loomrt_cudart"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_nvidia_includes}"
    INTERFACE_INCLUDE_DIRECTORIES "${_nvidia_includes}")
  add_library(loomrt::torch_cuda ALIAS loomrt_torch_cuda)
  message(STATUS "loomrt: LibTorch CUDA (libtorch_cuda, ${_cudart}): "
                 "building the CUDA backend")
elseif(EXISTS "${_torch_cuda}")
  # A CUDA wheel whose nvidia-* companions are missing or cut short (an
  # interrupted pip): building without the backend would hide that the GPU
  # code no longer compiles.
  message(FATAL_ERROR "loomrt: ${_torch_cuda} exists but the CUDA runtime "
                      "or NCCL of the nvidia-* wheels next to it does not "
                      "(${_nvidia}/cuda_runtime, ${_nvidia}/nccl): reinstall "
                      "them (.venv/bin/python -m pip install "
                      "--force-reinstall -r requirements.txt)")
else()
  message(STATUS "loomrt: this LibTorch has no CUDA: no CUDA backend "
                 "(loom-run --device cuda will say so)")
endif()
