# Installing Wormhole (docs/install.md).
#   make package       the .deb in $(BUILD)/packages (CPack)
#   make test-install  the .deb installed and run in a fresh Debian 12 root
#                      (tests/install; the root is cached in /var/cache/wormhole-test)
.PHONY: package test-install
TEST_DEPS += package

package: build
	@scripts/deps.sh package
	cd $(BUILD) && cpack -G DEB

test-install: build
	@scripts/deps.sh package
	cd $(BUILD) && ctest --output-on-failure -L install $(CTEST_ARGS)
