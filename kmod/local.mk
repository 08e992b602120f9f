# kmod/: the device ABI (kmod/psport_abi.h, compiled into libpulc) and the Linux module
# (kmod/linux, kbuild: `make -C kmod/linux`).  With --enable-kmod (the default when the
# kernel headers are installed) `make` builds kmod/linux/psport.ko whenever its sources or the
# firmware's changed; `make kmod` builds it in any case.  The module is built in the source
# tree (kbuild of this kernel writes its objects next to the sources).
KMOD_DIR = $(top_srcdir)/kmod/linux
KMOD_DEPS = $(top_srcdir)/kmod/psport_abi.h $(KMOD_DIR)/Kbuild $(KMOD_DIR)/psport.h \
	$(KMOD_DIR)/psport_main.c $(KMOD_DIR)/psport_nic.c $(KMOD_DIR)/psport_link.c \
	$(KMOD_DIR)/fw_crc32c.c $(KMOD_DIR)/fw_wire.c $(KMOD_DIR)/fw_image.c $(KMOD_DIR)/fw_rdp.c \
	$(KMOD_DIR)/fw_repair.c $(KMOD_DIR)/fw_host.c \
	$(top_srcdir)/mcp/crc32c.c $(top_srcdir)/mcp/crc32c.h $(top_srcdir)/mcp/mcp_wire.c \
	$(top_srcdir)/mcp/mcp_wire.h $(top_srcdir)/mcp/mcp_image.c $(top_srcdir)/mcp/mcp_image.h \
	$(top_srcdir)/mcp/mcp_rdp.c $(top_srcdir)/mcp/mcp_repair.c $(top_srcdir)/mcp/mcp_fw.h \
	$(top_srcdir)/mcp/mcp.h $(top_srcdir)/mcp/lanai.h $(top_srcdir)/mcp/mcp_compat.h \
	$(top_srcdir)/mcp/mcp_types.h $(top_srcdir)/mcp/mcp_host.c $(top_srcdir)/mcp/mcp_host.h

EXTRA_DIST += kmod/linux/Kbuild kmod/linux/Makefile kmod/linux/kernel-version \
	kmod/linux/README.md kmod/linux/psport.h kmod/linux/psport_main.c kmod/linux/psport_nic.c \
	kmod/linux/psport_link.c kmod/linux/fw_crc32c.c kmod/linux/fw_wire.c kmod/linux/fw_image.c \
	kmod/linux/fw_rdp.c kmod/linux/fw_repair.c kmod/linux/fw_host.c

if BUILD_KMOD
all-local: $(KMOD_DIR)/psport.ko
$(KMOD_DIR)/psport.ko: $(KMOD_DEPS)
	$(AM_V_GEN)$(MAKE) -C $(KMOD_DIR) KVER=$(KMOD_KVER) >kmod-build.log 2>&1 || \
		{ cat kmod-build.log; exit 1; }
clean-local: kmod-clean
endif

kmod:
	$(MAKE) -C $(KMOD_DIR)
kmod-clean:
	$(MAKE) -C $(KMOD_DIR) clean
.PHONY: kmod kmod-clean
CLEANFILES += kmod-build.log
