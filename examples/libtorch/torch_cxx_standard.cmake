# drun_torch_cxx_standard(TARGET): builds TARGET with the C++ standard the found LibTorch's
# headers require. ATen/ATen.h says which in its first lines ("#error C++17 or later
# compatible compiler is required to use ATen." in LibTorch 1.13 and 2.6; "C++20" in 2.14,
# Debian sid's). Read from that header, once, after find_package(Torch): C++20 when it asks
# for 20 or later, else the project's C++17.
function(drun_torch_cxx_standard target)
  set(_std 17)
  foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
    if(EXISTS "${_dir}/ATen/ATen.h")
      file(STRINGS "${_dir}/ATen/ATen.h" _need REGEX "C\\+\\+[0-9]+ or later compatible compiler")
      string(REGEX MATCH "C\\+\\+([0-9]+)" _ "${_need}")
      if(CMAKE_MATCH_1 GREATER_EQUAL 20)
        set(_std 20)
      endif()
      break()
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES CXX_STANDARD ${_std} CXX_STANDARD_REQUIRED ON)
endfunction()
