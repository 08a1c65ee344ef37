# SPDX-License-Identifier: Apache-2.0
# Packaging: the CMake package (tessera::tessera for applications,
# tessera::plugin for plugin authors) and the pkg-config files. Both are right
# for whatever prefix `cmake --install --prefix` is given, not only the one
# configured.
include(CMakePackageConfigHelpers)

set(TESSERA_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
set(TESSERA_PKGCONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Plugin authors compile against plugin.h (which includes tessera.h) and link
# nothing of ours: a headers-only target.
add_library(tessera-plugin INTERFACE)
add_library(tessera::plugin ALIAS tessera-plugin)
set_target_properties(tessera-plugin PROPERTIES EXPORT_NAME plugin)
target_include_directories(tessera-plugin INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS tessera-plugin EXPORT tesseraTargets COMPONENT dev)

install(EXPORT tesseraTargets NAMESPACE tessera:: FILE tesseraTargets.cmake
        DESTINATION ${TESSERA_CMAKE_INSTALL_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tesseraConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/tesseraConfig.cmake
                              INSTALL_DESTINATION ${TESSERA_CMAKE_INSTALL_DIR}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR
                                        TESSERA_INSTALL_MANIFEST_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/tesseraConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/tesseraConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/tesseraConfigVersion.cmake
        DESTINATION ${TESSERA_CMAKE_INSTALL_DIR} COMPONENT dev)

# pkg-config files are written in two stages. At configure time everything but
# the prefix is filled in (directories relative to ${prefix} unless they were
# configured absolute); at install time the prefix actually used is. The
# placeholder survives the first configure_file because it names itself.
set(TESSERA_PC_PREFIX "@TESSERA_PC_PREFIX@")
foreach(kind LIBDIR INCLUDEDIR DATADIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(TESSERA_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(TESSERA_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
foreach(pc tessera tessera-plugin)
  set(stage ${PROJECT_BINARY_DIR}/cmake/${pc}.pc.stage)
  set(final ${PROJECT_BINARY_DIR}/cmake/install/${pc}.pc)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${stage} @ONLY)
  install(CODE "set(TESSERA_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
configure_file(\"${stage}\" \"${final}\" @ONLY)" COMPONENT dev)
  install(FILES ${final} DESTINATION ${TESSERA_PKGCONFIG_INSTALL_DIR} COMPONENT dev)
endforeach()

# The licence travels with the core package (Debian: /usr/share/doc/<package>).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT core)

# Installed programs find libtessera relative to themselves, so an install
# into any prefix runs without LD_LIBRARY_PATH. Packagers installing into the
# system library directory can turn this off.
option(TESSERA_RELOCATABLE_RPATH "Give installed programs an \$ORIGIN-relative RPATH to libtessera" ON)
if(TESSERA_RELOCATABLE_RPATH AND TARGET tessera-cli AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}"
   AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
  get_target_property(tessera_cli_rpath tessera-cli INSTALL_RPATH)
  if(NOT tessera_cli_rpath)
    file(RELATIVE_PATH tessera_bin_to_lib ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}
         ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
    set_target_properties(tessera-cli PROPERTIES INSTALL_RPATH "\$ORIGIN/${tessera_bin_to_lib}")
  endif()
endif()
