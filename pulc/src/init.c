/*
 * init.c — PSP_Init / PSP_Finalize and the error texts of the public API.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hal.h"
#include "log.h"
#include "pulc.h"
#include "settings.h"

static struct pulc_hal self = {.sock = -1, .ctx = -1};
static int last_err;
static char last_msg[512];
static char str_buf[256];

struct pulc_hal *pulc_hal_self(void)
{
    return &self;
}

int pulc_init_abi(uint32_t abi)
{
    if (self.ctx >= 0)
        return 0;
    psp_log_init("pulc");
    last_msg[0] = '\0';
    int rc =
        pulc_hal_attach(&self, psp_setting_str("PSP_PSID_SOCKET"), abi, last_msg, sizeof last_msg);
    last_err = rc;
    return rc;
}

int PSP_Init(void)
{
    return pulc_init_abi(PSK_ABI_VERSION);
}

void PSP_Finalize(void)
{
    pulc_hal_detach(&self);
}

int PSP_GetNodeID(void)
{
    return self.ctx >= 0 ? (int)self.info.node_id : -1;
}

const char *PSP_StrError(int err)
{
    if (err == 0)
        return "success";
    if (err == last_err && last_msg[0])
        return last_msg;
    snprintf(str_buf, sizeof str_buf, "%s", strerror(err < 0 ? -err : err));
    return str_buf;
}
