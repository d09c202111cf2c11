/* ibwire pcap layer: capture maps that survive the file shrinking; see filemap.h. */
#define _GNU_SOURCE
#include "filemap.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct map_slot {
    uintptr_t start, end; /* start 0: free */
    volatile sig_atomic_t faulted;
} map_slot;

static map_slot slots[IBW_MAP_SLOTS];
static int live;                  /* registered maps (GIL held) */
static int installed;             /* our handler is in place */
static struct sigaction previous; /* what it replaced */
static volatile int64_t faults;
static uintptr_t page_size;       /* set before the handler is installed */

/* A SIGBUS that is not ours: to the previous handler, or the default action. */
static void chain(int sig, siginfo_t *info, void *context)
{
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction != NULL) {
            previous.sa_sigaction(sig, info, context);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* the default action (a fault cannot be ignored: the instruction would fault forever) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
    raise(SIGBUS); /* pending until we return; a fault also happens again on return */
}

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    int saved = errno;
    uintptr_t at = (uintptr_t)info->si_addr;
    if (info->si_code == BUS_ADRERR) {
        for (int i = 0; i < IBW_MAP_SLOTS; i++) {
            uintptr_t start = __atomic_load_n(&slots[i].start, __ATOMIC_ACQUIRE);
            if (start == 0 || at < start || at >= __atomic_load_n(&slots[i].end, __ATOMIC_ACQUIRE))
                continue;
            void *base = (void *)(at & ~(page_size - 1));
            if (mmap(base, page_size, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                != MAP_FAILED) {
                slots[i].faulted = 1;
                __atomic_add_fetch(&faults, 1, __ATOMIC_RELAXED);
                errno = saved;
                return; /* the read goes on, over zeros */
            }
            break;
        }
    }
    errno = saved;
    chain(sig, info, context);
}

static int install(void)
{
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGBUS, &ours, &previous) != 0)
        return -1;
    installed = 1;
    return 0;
}

static void uninstall(void)
{
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO)
        && now.sa_sigaction == on_sigbus)
        sigaction(SIGBUS, &previous, NULL);
    /* else someone installed theirs over ours: it stays (and may chain to ours, which
     * chains on to `previous`) */
    installed = 0;
}

int ibw_map_register(uintptr_t start, uintptr_t end)
{
    if (start == 0 || end <= start) {
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < IBW_MAP_SLOTS; i++) {
        if (slots[i].start != 0)
            continue;
        if (!installed && install() != 0)
            return -1;
        slots[i].faulted = 0;
        __atomic_store_n(&slots[i].end, end, __ATOMIC_RELEASE);
        __atomic_store_n(&slots[i].start, start, __ATOMIC_RELEASE);
        live++;
        return i;
    }
    errno = ENOMEM;
    return -1;
}

int ibw_map_faulted(int slot)
{
    return slot >= 0 && slot < IBW_MAP_SLOTS && slots[slot].faulted;
}

int ibw_map_release(int slot)
{
    if (slot < 0 || slot >= IBW_MAP_SLOTS || slots[slot].start == 0)
        return 0;
    __atomic_store_n(&slots[slot].start, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&slots[slot].end, 0, __ATOMIC_RELEASE);
    int faulted = slots[slot].faulted;
    if (--live == 0 && installed)
        uninstall();
    return faulted;
}

int64_t ibw_map_faults(void)
{
    return __atomic_load_n(&faults, __ATOMIC_RELAXED);
}
