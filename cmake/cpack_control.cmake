# SPDX-License-Identifier: Apache-2.0
# CPack post-build script (CPACK_POST_BUILD_SCRIPTS of cmake/cpack.cmake):
# what CPack 3.25 cannot write into a .deb's control area, done by unpacking
# the package, editing DEBIAN/ and packing it again with the same contents:
# - "Multi-Arch: same" for the packages in CPACK_TESSERA_MULTIARCH_SAME
#   (CPack has no such field);
# - an ldconfig trigger in place of the postinst/postrm that CPack writes for
#   a package with a shared library and that only call ldconfig (lintian:
#   lacks-ldconfig-trigger, maintscript-calls-ldconfig).
cmake_policy(VERSION 3.25)
find_program(DPKG_DEB dpkg-deb REQUIRED)
foreach(deb ${CPACK_PACKAGE_FILES})
  if(NOT deb MATCHES "\\.deb$")
    continue()
  endif()
  execute_process(COMMAND ${DPKG_DEB} --field ${deb} Package OUTPUT_VARIABLE package
                  OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  set(tree ${CPACK_TOPLEVEL_DIRECTORY}/control-fixup/${package})
  file(REMOVE_RECURSE ${tree})
  file(MAKE_DIRECTORY ${CPACK_TOPLEVEL_DIRECTORY}/control-fixup)
  execute_process(COMMAND ${DPKG_DEB} --raw-extract ${deb} ${tree} COMMAND_ERROR_IS_FATAL ANY)
  set(changed "")
  file(READ ${tree}/DEBIAN/control control)
  if(package IN_LIST CPACK_TESSERA_MULTIARCH_SAME AND NOT control MATCHES "Multi-Arch:")
    string(REGEX REPLACE "(Architecture: [^\n]*)" "\\1\nMulti-Arch: same" control "${control}")
    file(WRITE ${tree}/DEBIAN/control "${control}")
    list(APPEND changed "Multi-Arch: same")
  endif()
  foreach(script postinst postrm)
    if(EXISTS ${tree}/DEBIAN/${script})
      file(STRINGS ${tree}/DEBIAN/${script} lines)
      # Only CPack's own script: a shebang, set -e, comments and ldconfig.
      list(FILTER lines EXCLUDE REGEX "^(#.*|set -e|[ \t]*ldconfig|if .*then|fi|[ \t]*)$")
      if(NOT lines)
        file(REMOVE ${tree}/DEBIAN/${script})
        file(WRITE ${tree}/DEBIAN/triggers "activate-noawait ldconfig\n")
        list(APPEND changed "ldconfig trigger instead of ${script}")
      endif()
    endif()
  endforeach()
  if(changed)
    execute_process(COMMAND ${DPKG_DEB} --root-owner-group -Zxz --build ${tree} ${deb}
                    OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
    list(JOIN changed ", " changed)
    message(STATUS "${package}: ${changed}")
  endif()
  file(REMOVE_RECURSE ${tree})
endforeach()
