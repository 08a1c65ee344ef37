# SPDX-License-Identifier: Apache-2.0
# The HIP plugin's code-object bundle holds a non-empty AMD GPU entry for
# every target the build compiled (TESSERA_HIP_ARCHS less those no compiler
# here builds, which the build warns of), and no other:
#   cmake -DLIST=<code_object_bundle tool> -DBUNDLE=<file> -DARCHS="gfx90a;..." -P bundle_targets.cmake
execute_process(COMMAND ${LIST} --list ${BUNDLE} RESULT_VARIABLE status OUTPUT_VARIABLE listing)
message("---- ${BUNDLE} ----\n${listing}----")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cannot list ${BUNDLE}")
endif()
string(REGEX MATCHALL "hipv4-amdgcn-amd-amdhsa--gfx[0-9a-f]+ [1-9][0-9]*" entries "${listing}")
list(LENGTH entries count)
list(LENGTH ARCHS expected)
if(count EQUAL 0 OR NOT count EQUAL expected)
  message(FATAL_ERROR "the bundle holds ${count} AMD GPU code objects; the build made ${expected}: ${ARCHS}")
endif()
foreach(arch ${ARCHS})
  string(REGEX MATCH "--${arch} [1-9]" found "${listing}")
  if(NOT found)
    message(FATAL_ERROR "the bundle holds no code object for ${arch}")
  endif()
endforeach()
message("AMD GPU code objects in the bundle: ${count}: ${ARCHS}")
