/*
 * dmsg.c — the well-formedness check of daemon messages.
 */
#include "dmsg.h"

#include <string.h>

/* Fixed part of each type; 0 for no such type. */
static uint32_t fixed_size(uint16_t type)
{
    switch (type) {
    case PSID_M_ALIVE:
        return sizeof(struct psid_m_alive);
    case PSID_M_SPAWN:
        return sizeof(struct psid_m_spawn);
    case PSID_M_REPLY:
        return sizeof(struct psid_m_reply);
    case PSID_M_OUTPUT:
        return sizeof(struct psid_m_task);
    case PSID_M_EXIT:
        return sizeof(struct psid_m_exit);
    case PSID_M_STDIN:
        return sizeof(struct psid_m_stdin);
    case PSID_M_SIGNAL:
    case PSID_M_NOTIFY:
        return sizeof(struct psid_m_signal);
    case PSID_M_ORPHANS:
        return sizeof(struct psid_m_orphans);
    case PSID_M_HOLD:
        return sizeof(struct psid_m_hold);
    case PSID_M_STDIN_TAKEN:
        return sizeof(struct psid_m_stdin_taken);
    case PSID_M_WAS_DEAD:
        return sizeof(struct psid_m_was_dead);
    default:
        return 0;
    }
}

int psid_dmsg_check(uint16_t type, const void *data, uint32_t len)
{
    uint32_t fixed = fixed_size(type);
    if (!fixed || len < fixed)
        return -1;
    switch (type) {
    case PSID_M_SPAWN: {
        struct psid_m_spawn s;
        memcpy(&s, data, sizeof s);
        if (s.b.argc < 1 || s.b.argc > 65536 || s.b.envc > 65536 ||
            (s.b.flags & ~PSPC_SPAWN_FLAGS) || s.b.strings_len != len - fixed)
            return -1;
        return pspc_strings_check((const char *)data + fixed, s.b.strings_len,
                                  1 + s.b.argc + s.b.envc);
    }
    case PSID_M_OUTPUT: {
        struct psid_m_task t;
        memcpy(&t, data, sizeof t);
        return (t.stream == PSPC_STDOUT || t.stream == PSPC_STDERR) && t.pid > 0 ? 0 : -1;
    }
    case PSID_M_EXIT: {
        struct psid_m_exit e;
        memcpy(&e, data, sizeof e);
        return len == fixed && e.pid > 0 && !(e.flags & ~(PSPC_EXIT_LOST | PSPC_EXIT_NOTIFY)) ? 0
                                                                                              : -1;
    }
    case PSID_M_STDIN: {
        struct psid_m_stdin s;
        memcpy(&s, data, sizeof s);
        return s.pid > 0 && s.eof <= 1 ? 0 : -1;
    }
    case PSID_M_SIGNAL:
    case PSID_M_NOTIFY: {
        struct psid_m_signal s;
        memcpy(&s, data, sizeof s);
        return len == fixed && s.pid > 0 && s.sig >= 0 && s.sig < 65 ? 0 : -1;
    }
    case PSID_M_HOLD: {
        struct psid_m_hold h;
        memcpy(&h, data, sizeof h);
        return len == fixed && h.hold <= 1 ? 0 : -1;
    }
    case PSID_M_STDIN_TAKEN: {
        struct psid_m_stdin_taken s;
        memcpy(&s, data, sizeof s);
        return len == fixed && s.pid > 0 ? 0 : -1;
    }
    default:
        return len == fixed ? 0 : -1;
    }
}
