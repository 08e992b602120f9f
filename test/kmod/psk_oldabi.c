/*
 * psk_oldabi — a client built for device ABI version 1 against the psport module, for the
 * kernel module test (test/kmod/guest-init): its INFO (the version 1 struct, 56 bytes, so
 * another command number) must be answered with the module's version, and its ATTACH must be
 * refused with EPROTO, which libpulc turns into a message naming both versions.
 *
 *   psk_oldabi [DEVICE]      (default /dev/psport)
 *
 * Prints "psk_oldabi: INFO answered, module ABI <n>; ATTACH of ABI 1: <error>".  Exit 0 when
 * both hold, 1 otherwise, 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "psport_abi.h"

/* struct psk_info as ABI version 1 had it: the fields up to link_kind */
struct psk_info_v1 {
    psk_u32 abi_version, mcp_abi_version, provider, flags;
    psk_u64 image_size, area_size;
    psk_u16 node_id, max_nodes, contexts, contexts_used;
    psk_u32 slot_size, max_clients;
    char link_kind[8];
};
#define PSK_IOC_INFO_V1 _IOR(PSK_IOC_MAGIC, 1, struct psk_info_v1)

int main(int argc, char **argv)
{
    if (argc > 2) {
        fprintf(stderr, "usage: psk_oldabi [DEVICE]\n");
        return 2;
    }
    _Static_assert(sizeof(struct psk_info_v1) == 56, "the version 1 INFO was 56 bytes");
    const char *dev = argc > 1 ? argv[1] : PSK_DEVICE_PATH;
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "psk_oldabi: cannot open %s: %s\n", dev, strerror(errno));
        return 1;
    }
    struct psk_info_v1 in;
    memset(&in, 0xff, sizeof in);
    if (ioctl(fd, PSK_IOC_INFO_V1, &in) != 0) {
        printf("psk_oldabi: INFO of the version 1 size refused: %s\n", strerror(errno));
        return 1;
    }
    struct psk_attach at = {1, -1, 0, 0};
    int rc = ioctl(fd, PSK_IOC_ATTACH, &at);
    int e = rc ? errno : 0;
    printf("psk_oldabi: INFO answered, module ABI %u; ATTACH of ABI 1: %s\n", in.abi_version,
           rc ? strerror(e) : "accepted");
    close(fd);
    return in.abi_version == PSK_ABI_VERSION && in.provider == PSK_PROVIDER_KERNEL && rc != 0 &&
                   e == EPROTO
               ? 0
               : 1;
}
