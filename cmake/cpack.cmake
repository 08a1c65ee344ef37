# SPDX-License-Identifier: Apache-2.0
# Debian packages: `cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr (GNUInstallDirs then picks the multiarch libdir)
# and -DTESSERA_RELOCATABLE_RPATH=OFF. One package per install component:
#   core   -> libtessera<soversion>   dev -> libtessera-dev
#   tools  -> tessera-tools           <plugin> -> tessera-plugin-<plugin>
# docs/PACKAGING.md describes the packages; .ci/packages builds, lints,
# installs and removes them.

# Debian wants /usr/share/doc/<package>/{copyright,changelog.Debian.gz} in
# every package. Other installs get neither: the default follows the prefix.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(tessera_deb_docs_default ON)
else()
  set(tessera_deb_docs_default OFF)
endif()
option(TESSERA_DEB_DOCS "Install Debian's per-package copyright and changelog.Debian.gz"
       ${tessera_deb_docs_default})
set(TESSERA_PACKAGE_MAINTAINER "tessera maintainers <maintainers@users.noreply.a-seed-45af730b.example>"
    CACHE STRING "Maintainer field of the Debian packages")

set(tessera_deb_release 1)
set(tessera_deb_version ${PROJECT_VERSION}-${tessera_deb_release})
set(tessera_core_package libtessera${PROJECT_VERSION_MAJOR})

# Component -> package name, section, description (first line: synopsis).
set(tessera_deb_components core dev tools ${TESSERA_BACKENDS_BUILT})
set(tessera_deb_core_name ${tessera_core_package})
set(tessera_deb_core_section libs)
set(tessera_deb_core_description "portable compute library: GEMM, attention and fused LLM ops
tessera runs matrix multiplication, attention and the fused operations of
large language models on CPUs and GPUs of every vendor through one C API.
Each vendor is a plugin the library loads at run time (dlopen), so an
application is built once and uses whatever plugins are installed.

This package holds the shared library. Install at least one
tessera-plugin-* package (tessera-plugin-cpu runs everywhere).")
set(tessera_deb_dev_name libtessera-dev)
set(tessera_deb_dev_section libdevel)
set(tessera_deb_dev_description "portable compute library: development files
tessera runs matrix multiplication, attention and the fused operations of
large language models on CPUs and GPUs of every vendor through one C API.

This package holds the headers (the application API and the plugin ABI),
the libtessera.so link, pkg-config files (tessera, tessera-plugin) and the
CMake package (find_package(tessera): tessera::tessera, tessera::plugin).")
set(tessera_deb_tools_name tessera-tools)
set(tessera_deb_tools_section science)
set(tessera_deb_tools_description "portable compute library: command-line tool
tessera runs matrix multiplication, attention and the fused operations of
large language models on CPUs and GPUs of every vendor through one C API.

This package holds the tessera command: list devices and plugins (tessera
devices), check every operation against a reference (tessera check),
benchmark (tessera bench) and tune (tessera tune).")

set(tessera_deb_plugin_cpu "CPU plugin
The CPU plugin runs every operation on the host's cores with its own thread
pool: portable C kernels, and AVX2 and AVX-512 ones chosen at run time.")
set(tessera_deb_plugin_vulkan "Vulkan plugin
The Vulkan plugin runs every operation on Vulkan 1.2 GPUs of any vendor
through the Vulkan loader (libvulkan.so.1, loaded at run time). Its compute
shaders are built in; it needs a Vulkan driver (ICD) to find a device.")
set(tessera_deb_plugin_opencl "OpenCL plugin
The OpenCL plugin runs every operation on OpenCL 1.2+ devices through the ICD
loader (libOpenCL.so.1, loaded at run time). Its kernels are compiled by the
driver on first use and cached; it needs an OpenCL driver (ICD).")
set(tessera_deb_plugin_cuda "CUDA plugin
The CUDA plugin runs every operation on NVIDIA GPUs through the driver API
(libcuda.so.1 of the NVIDIA driver, loaded at run time; the CUDA toolkit is
not needed). Without the driver it loads and reports no device.")
set(tessera_deb_plugin_hip "HIP plugin
The HIP plugin runs every operation on AMD GPUs (CDNA and RDNA) through the
HIP runtime (libamdhip64, loaded at run time). Without it the plugin loads
and reports no device.")
# What dpkg-shlibdeps cannot see: vendor libraries the plugins dlopen.
set(tessera_deb_plugin_vulkan_depends "libvulkan1")
set(tessera_deb_plugin_vulkan_recommends "mesa-vulkan-drivers | vulkan-icd")
set(tessera_deb_plugin_opencl_depends "ocl-icd-libopencl1 | libopencl1")
set(tessera_deb_plugin_opencl_recommends "opencl-icd")
set(tessera_deb_plugin_cuda_suggests "libcuda1")
set(tessera_deb_plugin_hip_suggests "libamdhip64-5 | libamdhip64-6")
foreach(plugin ${TESSERA_BACKENDS_BUILT})
  set(tessera_deb_${plugin}_name tessera-plugin-${plugin})
  set(tessera_deb_${plugin}_section libs)
  string(REPLACE "\n" ";" lines "${tessera_deb_plugin_${plugin}}")
  list(POP_FRONT lines synopsis)
  list(JOIN lines "\n" body)
  set(tessera_deb_${plugin}_description "portable compute library: ${synopsis}
tessera runs matrix multiplication, attention and the fused operations of
large language models on CPUs and GPUs of every vendor through one C API.

${body}")
endforeach()

# changelog.Debian.gz, dated by SOURCE_DATE_EPOCH or else the last commit,
# so that packages of one version are byte-identical in /usr/share/doc (a
# Multi-Arch: same requirement) and reproducible.
if(TESSERA_DEB_DOCS)
  if(NOT DEFINED ENV{SOURCE_DATE_EPOCH})
    find_package(Git QUIET)
    if(GIT_FOUND)
      execute_process(COMMAND ${GIT_EXECUTABLE} log -1 --format=%ct
                      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE epoch
                      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE git_result)
      if(git_result EQUAL 0 AND epoch MATCHES "^[0-9]+$")
        set(ENV{SOURCE_DATE_EPOCH} ${epoch})
      endif()
    endif()
  endif()
  string(TIMESTAMP tessera_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  set(changelog ${PROJECT_BINARY_DIR}/packaging/changelog.Debian)
  file(WRITE ${changelog}
       "tessera (${tessera_deb_version}) unstable; urgency=medium\n\n"
       "  * Upstream release ${PROJECT_VERSION}, packaged by CPack (cmake/cpack.cmake).\n\n"
       " -- ${TESSERA_PACKAGE_MAINTAINER}  ${tessera_deb_date}\n")
  find_program(TESSERA_GZIP gzip REQUIRED)
  # -n: no name or time stamp in the header; -9: what lintian expects.
  execute_process(COMMAND ${TESSERA_GZIP} -9nf ${changelog} RESULT_VARIABLE gzip_result)
  if(NOT gzip_result EQUAL 0)
    message(FATAL_ERROR "gzip ${changelog} failed")
  endif()
  foreach(component ${tessera_deb_components})
    set(doc ${CMAKE_INSTALL_DATADIR}/doc/${tessera_deb_${component}_name})
    install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/copyright ${changelog}.gz
            DESTINATION ${doc} COMPONENT ${component})
  endforeach()
endif()

set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VENDOR tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${TESSERA_PACKAGE_MAINTAINER}")
# Defined but empty: CPackDeb would put the project's description in front of
# every package's own synopsis.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL ${tessera_deb_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${tessera_deb_release})
set(CPACK_DEBIAN_PACKAGE_SOURCE tessera)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
# dpkg-shlibdeps finds libc6 and friends; libtessera itself is not yet
# installed when tessera-tools is packaged, so its directory in this build is
# searched and the dependency is stated below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/${CMAKE_INSTALL_LIBDIR})
# The shlibs file of libtessera<N> (plugins have no SONAME, so they get
# none). ">=": any later 0.x keeps the ABI.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(tessera_core_dep "${tessera_core_package} (= ${tessera_deb_version})")
foreach(component ${tessera_deb_components})
  string(TOUPPER ${component} C)
  set(CPACK_DEBIAN_${C}_PACKAGE_NAME ${tessera_deb_${component}_name})
  set(CPACK_DEBIAN_${C}_PACKAGE_SECTION ${tessera_deb_${component}_section})
  set(CPACK_DEBIAN_${C}_DESCRIPTION "${tessera_deb_${component}_description}")
  set(CPACK_COMPONENT_${C}_DESCRIPTION "${tessera_deb_${component}_description}")
endforeach()
if(TARGET tessera-cpu)
  set(CPACK_DEBIAN_CORE_PACKAGE_RECOMMENDS tessera-plugin-cpu)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS tessera-plugin-cpu)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${tessera_core_dep}")
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${tessera_core_dep}")
# The plugin ABI, not the exact core version, is what a plugin needs: any
# libtessera of this version or later negotiates it.
foreach(plugin ${TESSERA_BACKENDS_BUILT})
  string(TOUPPER ${plugin} C)
  set(depends "${tessera_core_package} (>= ${PROJECT_VERSION})")
  if(tessera_deb_plugin_${plugin}_depends)
    string(APPEND depends ", ${tessera_deb_plugin_${plugin}_depends}")
  endif()
  set(CPACK_DEBIAN_${C}_PACKAGE_DEPENDS "${depends}")
  if(tessera_deb_plugin_${plugin}_recommends)
    set(CPACK_DEBIAN_${C}_PACKAGE_RECOMMENDS "${tessera_deb_plugin_${plugin}_recommends}")
  endif()
  if(tessera_deb_plugin_${plugin}_suggests)
    set(CPACK_DEBIAN_${C}_PACKAGE_SUGGESTS "${tessera_deb_plugin_${plugin}_suggests}")
  endif()
endforeach()

# CPack 3.25 writes no Multi-Arch field and calls ldconfig from maintainer
# scripts: cpack_control.cmake fixes both after the packages are built.
# Multi-Arch: same on the library, -dev and plugin packages is what lets
# amd64 and i386 (or arm64 and armhf) packages be installed together (their
# manifests are named per architecture).
set(CPACK_TESSERA_MULTIARCH_SAME ${tessera_core_package} libtessera-dev)
foreach(plugin ${TESSERA_BACKENDS_BUILT})
  list(APPEND CPACK_TESSERA_MULTIARCH_SAME tessera-plugin-${plugin})
endforeach()
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/cpack_control.cmake)

include(CPack)
