# Where `cmake --install build --prefix P` (and the .deb, with P=/usr) puts
# things. Included before the component folders, whose install() rules use
# these directories (relative to the prefix).
#
#   P/bin/wormhole-server, P/bin/wormhole-run (and wormholectl when built)
#   P/lib/<multiarch>/wormhole/     the guest drop-ins (libcudart.so.13, libcuda.so.1, ...):
#                                   a private directory, so they never shadow NVIDIA's
#   P/lib/<multiarch>/pkgconfig/wormhole.pc
#   P/include/wormhole/region.h     the shared-region ABI (C)
#   P/lib/systemd/system/wormhole-server.service
#   /etc/wormhole/server.toml       (P/etc/wormhole/server.toml unless P is /usr)
include(GNUInstallDirs)
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(WH_INSTALL_LIBDIR lib/${CMAKE_LIBRARY_ARCHITECTURE})
else()
  set(WH_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR})
endif()
set(WH_INSTALL_GUESTLIBDIR ${WH_INSTALL_LIBDIR}/wormhole)
set(WH_INSTALL_BINDIR ${CMAKE_INSTALL_BINDIR})
