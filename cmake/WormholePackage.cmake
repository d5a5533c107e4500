# Install rules that need every target, the files generated for the install
# prefix (cmake/WormholeInstallFiles.cmake, at install time), and the Debian
# package (CPack: `make package` or `cpack -G DEB` in the build directory).
# The directories are in cmake/WormholeInstall.cmake.

# wormhole-run finds the drop-ins relative to itself (../lib/<multiarch>/wormhole).
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/wormhole-run ${PROJECT_SOURCE_DIR}/scripts/wormhole-ptxas
  DESTINATION ${WH_INSTALL_BINDIR})
# The admin tool, when this tree builds one.
if(TARGET wormholectl)
  install(TARGETS wormholectl RUNTIME DESTINATION ${WH_INSTALL_BINDIR})
endif()
# The shared-region ABI (a C header): what another implementation of either
# side needs. The wire protocol's C++ tables stay private to the tree.
install(FILES ${PROJECT_SOURCE_DIR}/shm-ring/include/wormhole/region.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/wormhole)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/install.md
              ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/compatibility.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

# wormhole.pc, wormhole-server.service and /etc/wormhole/server.toml name
# the prefix given at install time (`cmake --install --prefix P`), so they
# are written then.
install(CODE "
set(WH_DIST \"${PROJECT_SOURCE_DIR}/dist\")
set(WH_GEN \"${PROJECT_BINARY_DIR}/dist\")
set(WH_INSTALL_LIBDIR \"${WH_INSTALL_LIBDIR}\")
set(WH_INSTALL_GUESTLIBDIR \"${WH_INSTALL_GUESTLIBDIR}\")
set(WH_INSTALL_BINDIR \"${WH_INSTALL_BINDIR}\")
set(WH_INSTALL_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
set(PROJECT_VERSION \"${PROJECT_VERSION}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/WormholeInstallFiles.cmake)

# The .deb: everything above under /usr (the config under /etc, a conffile),
# Depends from dpkg-shlibdeps (the sim backend's OpenBLAS and FFTW
# included), a postinst that creates the system user and group "wormhole".
# The service is neither enabled nor started.
file(WRITE ${PROJECT_BINARY_DIR}/dist/conffiles "/etc/wormhole/server.toml\n")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME wormhole)
set(CPACK_PACKAGE_VENDOR Wormhole)
set(CPACK_PACKAGE_CONTACT "Wormhole maintainers <wormhole@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "CUDA forwarding: drop-in CUDA libraries and the server that runs their calls")
set(CPACK_PACKAGE_DESCRIPTION "wormhole-server runs CUDA calls forwarded by Wormhole's drop-in libraries
(libcudart.so.13, libcuda.so.1, cuBLAS, cuBLASLt, cuFFT, cuRAND) on a GPU
or, without one, on its sim device (a PTX interpreter with OpenBLAS and
FFTW). The drop-ins live in a private directory; wormhole-run, or the
rpath from pkg-config's wormhole.pc, makes a program use them.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS usr/${WH_INSTALL_GUESTLIBDIR})
# useradd/groupadd (passwd) in postinst.
set(CPACK_DEBIAN_PACKAGE_DEPENDS passwd)
# ucx:// (docs/remote.md): UCX is loaded with dlopen, only when a server listens on
# a network or a client names one; shlibdeps cannot see it.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS libucx0)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/dist/postinst ${PROJECT_SOURCE_DIR}/dist/prerm ${PROJECT_SOURCE_DIR}/dist/postrm
  ${PROJECT_BINARY_DIR}/dist/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/packages)
include(CPack)
