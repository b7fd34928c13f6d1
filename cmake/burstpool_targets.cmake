# Helpers shared by the library targets (see the top-level CMakeLists.txt).

# burstpool_library(NAME SOURCES...): a static library with the project's
# warnings and CPU flags; the public headers (include/) come through
# burstpool_base.
function(burstpool_library name)
  add_library(${name} STATIC ${ARGN})
  target_compile_features(${name} PUBLIC cxx_std_20)
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra ${BURSTPOOL_ARCH_FLAGS} $<$<CONFIG:Release>:-O3>>)
endfunction()

# burstpool_view(TARGET SCOPE NAME=FOLDER...): makes FOLDER includable as
# "NAME/header.hpp" by TARGET (SCOPE PRIVATE) or by TARGET and whatever links
# it (PUBLIC). The view is a directory holding only symbolic links, so no
# other folder comes into sight with it.
function(burstpool_view target scope)
  set(view ${CMAKE_BINARY_DIR}/views/${target})
  file(MAKE_DIRECTORY ${view})
  foreach(pair ${ARGN})
    string(REPLACE "=" ";" parts ${pair})
    list(GET parts 0 name)
    list(GET parts 1 folder)
    if(NOT EXISTS ${view}/${name})
      file(CREATE_LINK ${folder} ${view}/${name} SYMBOLIC)
    endif()
  endforeach()
  target_include_directories(${target} ${scope} ${view})
endfunction()
