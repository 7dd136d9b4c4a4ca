# drun_torch_cxx_standard(TARGET): builds TARGET with the C++ standard the found LibTorch's
# headers require. LibTorch 1.13 (Debian 12) and 2.6 (Debian 13) build as C++17; 2.14 (sid)
# stop in c10/macros/Macros.h with "#error C++20 or later compatible compiler is required"
# under C++17. The requirement is read from that header itself, once, after
# find_package(Torch): C++20 when it carries that #error, else the project's C++17.
function(drun_torch_cxx_standard target)
  set(_std 17)
  foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
    if(EXISTS "${_dir}/c10/macros/Macros.h")
      file(STRINGS "${_dir}/c10/macros/Macros.h" _cxx20 REGEX "C\\+\\+20 or later compatible compiler")
      if(_cxx20)
        set(_std 20)
      endif()
      break()
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES CXX_STANDARD ${_std} CXX_STANDARD_REQUIRED ON)
endfunction()
