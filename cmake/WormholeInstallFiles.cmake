# Run at install time (install(SCRIPT), after cmake/WormholePackage.cmake's
# install(CODE) set WH_*): writes the files that name the install prefix.
set(WH_PREFIX "${CMAKE_INSTALL_PREFIX}")
if(WH_PREFIX STREQUAL "/usr")
  set(WH_SYSCONFDIR /etc)
else()
  set(WH_SYSCONFDIR "${WH_PREFIX}/etc")
endif()
set(WH_BINDIR "${WH_PREFIX}/${WH_INSTALL_BINDIR}")
set(WH_DOCDIR "${WH_PREFIX}/${WH_INSTALL_DOCDIR}")
configure_file("${WH_DIST}/wormhole.pc.in" "${WH_GEN}/wormhole.pc" @ONLY)
configure_file("${WH_DIST}/wormhole-server.service.in" "${WH_GEN}/wormhole-server.service" @ONLY)
file(INSTALL "${WH_GEN}/wormhole.pc" DESTINATION "${WH_PREFIX}/${WH_INSTALL_LIBDIR}/pkgconfig")
file(INSTALL "${WH_GEN}/wormhole-server.service" DESTINATION "${WH_PREFIX}/lib/systemd/system")
# The config: an administrator's edited copy is never overwritten; the
# shipped one then lands beside it as server.toml.dist.
set(_conf "$ENV{DESTDIR}${WH_SYSCONFDIR}/wormhole/server.toml")
if(EXISTS "${_conf}")
  file(READ "${_conf}" _old)
  file(READ "${WH_DIST}/server.toml" _new)
  if(NOT _old STREQUAL _new)
    message(STATUS "Keeping the edited ${_conf}; the default goes to server.toml.dist")
    file(INSTALL "${WH_DIST}/server.toml" DESTINATION "${WH_SYSCONFDIR}/wormhole"
      RENAME server.toml.dist PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    return()
  endif()
endif()
file(INSTALL "${WH_DIST}/server.toml" DESTINATION "${WH_SYSCONFDIR}/wormhole"
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
