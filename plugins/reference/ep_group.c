/*
 * plugins/reference/ep_group.c - the reference plugin's EP groups (ep.h):
 * one POSIX shared-memory segment per group, named from the bootstrap (the
 * unique id: its process, counter and clock; or, for ranks that are threads
 * of one process, that process and the comm pointer they share). The first
 * rank to come creates and initializes it; the others open it. One
 * process-shared, robust mutex guards the joins and the barriers: simple,
 * race-free across threads and processes, and speed is no aim of a double.
 *
 * Every wait is bounded by the option ep_timeout_ms; a rank that does not
 * come fails the others with a message naming it, never a hang. A rank
 * whose process dies holding the mutex breaks the group (robust mutex).
 * The segment's name is removed as soon as every rank has joined (the
 * mappings live on), or when the last rank of a failed join leaves; only a
 * process killed during the join can leave it behind in /dev/shm.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugins/reference/ep.h"
#include "plugins/reference/reference.h"

#define ID_MAGIC     "refep2"
#define ID_MAGIC_LEN 6
#define ID_BYTES     (ID_MAGIC_LEN + 4 + 8 + 8) /* magic, pid, counter, clock */
#define READY        0x52454144u                /* "READ": the creator finished the header */
#define ALIGN        64

struct ref_ep_hdr {
    atomic_uint ready; /* READY once initialized: joiners wait for it */
    uint32_t size, max_tokens, hidden, top_k, num_experts;
    int32_t act_dtype, dispatch, mode;
    uint64_t total;
    pthread_mutex_t lock; /* process-shared, robust */
    pthread_cond_t cond;  /* process-shared */
    uint32_t n_joined, members;
    uint8_t joined[REF_EP_MAX_RANKS];
    /* Barrier: `generation` counts completed barriers. */
    uint64_t generation;
    uint32_t n_arrived;
    uint8_t arrived[REF_EP_MAX_RANKS];
    int32_t broken;
    char broken_why[512];
    ref_ep_slot slots[REF_EP_MAX_RANKS];
};

static atomic_uint_fast64_t id_counter;

/* The segments this process has mapped, one mapping per segment however
 * many of its ranks are threads here: the threads then synchronize through
 * one address (which ThreadSanitizer can follow), and map it once. */
typedef struct mapping {
    struct mapping *next;
    char name[96];
    ref_ep_hdr *hdr;
    size_t total;
    uint32_t users;
} mapping;

static pthread_mutex_t mappings_lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *mappings;

static void put_le(uint8_t *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static size_t align_up(size_t v)
{
    return (v + ALIGN - 1) / ALIGN * ALIGN;
}

/* An id unique on this machine: the process, a counter and the clock. */
fmoe_status ref_ep_unique_id(fmoe_ep_unique_id_args *a)
{
    const ref_state *st = a->state;
    if (a->capacity < ID_BYTES)
        return st->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "unique id needs %d bytes, given %u", ID_BYTES,
                                   a->capacity);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memcpy(a->bytes, ID_MAGIC, ID_MAGIC_LEN);
    put_le(a->bytes + ID_MAGIC_LEN, (uint64_t)getpid(), 4);
    put_le(a->bytes + ID_MAGIC_LEN + 4, (uint64_t)atomic_fetch_add(&id_counter, 1) + 1, 8);
    put_le(a->bytes + ID_MAGIC_LEN + 12, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, 8);
    a->length = ID_BYTES;
    return FMOE_STATUS_OK;
}

/* The segment's name for this bootstrap. */
static fmoe_status segment_name(const fmoe_ep_group_args *a, const fmoe_host *h, char *name, size_t cap)
{
    if (a->comm) {
        snprintf(name, cap, "/fmoe-ep-c%u-%" PRIxPTR, (unsigned)getpid(), (uintptr_t)a->comm);
        return FMOE_STATUS_OK;
    }
    if (a->unique_id_length != ID_BYTES || memcmp(a->unique_id, ID_MAGIC, ID_MAGIC_LEN) != 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "unique id: %u bytes not made by this plugin's unique_id", a->unique_id_length);
    const uint8_t *p = a->unique_id + ID_MAGIC_LEN;
    snprintf(name, cap, "/fmoe-ep-%u-%" PRIu64 "-%" PRIx64, (unsigned)get_le(p, 4), get_le(p + 4, 8),
             get_le(p + 12, 8));
    return FMOE_STATUS_OK;
}

static void layout(const fmoe_ep_group_args *a, ref_ep_layout *l)
{
    memset(l, 0, sizeof *l);
    l->elem = a->act_dtype == FMOE_DTYPE_F32 ? 4 : 2;
    uint64_t mt = a->max_tokens_per_rank, k = a->top_k;
    l->rows = (uint64_t)a->size * mt * k;
    size_t off = 0;
    l->x = off;
    off = align_up(off + mt * a->hidden_size * l->elem);
    l->w = off;
    off = align_up(off + mt * k * sizeof(float));
    l->ids = off;
    off = align_up(off + mt * k * sizeof(int32_t));
    l->owner = off;
    off = align_up(off + (size_t)a->num_experts * sizeof(int32_t));
    l->row_of = off;
    off = align_up(off + mt * k * sizeof(int32_t));
    l->out = off;
    off = align_up(off + l->rows * a->hidden_size * l->elem);
    l->region = off;
    l->header = align_up(sizeof(ref_ep_hdr));
    l->total = l->header + (size_t)a->size * l->region;
}

/* Lock the group's mutex; a previous holder that died breaks the group. */
static void lock(ref_ep_hdr *s)
{
    if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) {
        pthread_mutex_consistent(&s->lock);
        if (!s->broken) {
            s->broken = 1;
            snprintf(s->broken_why, sizeof s->broken_why,
                     "EP group: a rank's process died inside the group; the group is broken");
        }
        pthread_cond_broadcast(&s->cond);
    }
}

static int timedwait(ref_ep_hdr *s, const struct timespec *deadline)
{
    int rc = pthread_cond_timedwait(&s->cond, &s->lock, deadline);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&s->lock);
        s->broken = 1;
        snprintf(s->broken_why, sizeof s->broken_why, "EP group: a rank's process died inside the group");
    }
    return rc;
}

static void deadline_after(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Initialize a new segment's header (its creator, before READY). */
static int init_header(ref_ep_hdr *s, const fmoe_ep_group_args *a, const ref_ep_layout *l)
{
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    if (pthread_mutexattr_init(&ma) != 0)
        return -1;
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&s->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (rc != 0 || pthread_condattr_init(&ca) != 0)
        return -1;
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    rc = pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return -1;
    s->size = a->size;
    s->max_tokens = a->max_tokens_per_rank;
    s->hidden = a->hidden_size;
    s->top_k = a->top_k;
    s->num_experts = a->num_experts;
    s->act_dtype = a->act_dtype;
    s->dispatch = a->dispatch;
    s->mode = a->mode;
    s->total = l->total;
    atomic_store(&s->ready, READY);
    return 0;
}

/* The first field this rank disagrees on with the segment's creator. */
static int mismatch(const ref_ep_hdr *s, const fmoe_ep_group_args *a, char *why, size_t cap)
{
    const struct {
        const char *name;
        long long mine, theirs;
    } f[] = {{"size", a->size, s->size},
             {"max_tokens_per_rank", a->max_tokens_per_rank, s->max_tokens},
             {"hidden_size", a->hidden_size, s->hidden},
             {"top_k", a->top_k, s->top_k},
             {"num_experts", a->num_experts, s->num_experts},
             {"act_dtype", a->act_dtype, s->act_dtype},
             {"dispatch", a->dispatch, s->dispatch},
             {"mode", a->mode, s->mode}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].mine != f[i].theirs) {
            snprintf(why, cap, "rank %u asks for %s = %lld, the group was made with %lld", a->rank, f[i].name,
                     f[i].mine, f[i].theirs);
            return 1;
        }
    return 0;
}

/* Create or open the segment and map it: 0, or -1 with `why`. A joiner
 * waits (bounded) for the creator to finish the header. */
static int map_segment(const char *name, const fmoe_ep_group_args *a, const ref_ep_layout *l, long timeout_ms,
                       ref_ep_hdr **out, char *why, size_t cap)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
        void *p = MAP_FAILED;
        if (ftruncate(fd, (off_t)l->total) == 0)
            p = mmap(NULL, l->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED || init_header(p, a, l) != 0) {
            snprintf(why, cap, "shared memory %s (%zu bytes): %s", name, l->total, strerror(errno));
            if (p != MAP_FAILED)
                munmap(p, l->total);
            shm_unlink(name);
            return -1;
        }
        *out = p;
        return 0;
    }
    if (errno != EEXIST || (fd = shm_open(name, O_RDWR, 0600)) < 0) {
        snprintf(why, cap, "shared memory %s: %s", name, strerror(errno));
        return -1;
    }
    /* Wait until the creator has sized the segment and written the header. */
    double deadline = now_s() + timeout_ms / 1000.0;
    ref_ep_hdr *s = MAP_FAILED;
    for (;;) {
        struct stat sb;
        if (s == MAP_FAILED && fstat(fd, &sb) == 0 && (size_t)sb.st_size >= sizeof *s)
            s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (s != MAP_FAILED && atomic_load(&s->ready) == READY)
            break;
        if (now_s() >= deadline) {
            snprintf(why, cap,
                     "EP group: rank %u waited %ld ms (option ep_timeout_ms) for the group's shared "
                     "memory to be set up by the rank that made it",
                     a->rank, timeout_ms);
            if (s != MAP_FAILED)
                munmap(s, sizeof *s);
            close(fd);
            return -1;
        }
        struct timespec nap = {0, 1000000L};
        nanosleep(&nap, NULL);
    }
    int bad = mismatch(s, a, why, cap);
    size_t total = s->total;
    munmap(s, sizeof *s);
    void *p = bad ? MAP_FAILED : mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (bad)
        return -1;
    if (p == MAP_FAILED || total != l->total) {
        snprintf(why, cap, "shared memory %s: %s", name, p == MAP_FAILED ? strerror(errno) : "size differs");
        if (p != MAP_FAILED)
            munmap(p, total);
        return -1;
    }
    *out = p;
    return 0;
}

/* "2, 3" : the ranks whose flag is 0. */
static void list_missing(const uint8_t *flags, uint32_t size, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (uint32_t r = 0; r < size; r++) {
        if (flags[r])
            continue;
        int n = snprintf(out + len, cap - len, "%s%u", len ? ", " : "", r);
        if (n < 0 || (size_t)n >= cap - len)
            break;
        len += (size_t)n;
    }
}

/* Map `name` for this process, or share the mapping a thread here made. */
static int acquire(const char *name, const fmoe_ep_group_args *a, const ref_ep_layout *l, long timeout_ms,
                   ref_ep_hdr **out, char *why, size_t cap)
{
    pthread_mutex_lock(&mappings_lock);
    mapping *m = mappings;
    while (m && strcmp(m->name, name) != 0)
        m = m->next;
    int rc = 0;
    if (m) {
        if (mismatch(m->hdr, a, why, cap))
            rc = -1;
        else
            m->users++;
    } else if (!(m = calloc(1, sizeof *m))) {
        snprintf(why, cap, "out of memory");
        rc = -1;
    } else if (map_segment(name, a, l, timeout_ms, &m->hdr, why, cap) != 0) {
        free(m);
        m = NULL;
        rc = -1;
    } else {
        snprintf(m->name, sizeof m->name, "%s", name);
        m->total = l->total;
        m->users = 1;
        m->next = mappings;
        mappings = m;
    }
    if (rc == 0)
        *out = m->hdr;
    pthread_mutex_unlock(&mappings_lock);
    return rc;
}

static void release(ref_ep_group *g)
{
    pthread_mutex_lock(&mappings_lock);
    for (mapping **p = &mappings; *p; p = &(*p)->next) {
        mapping *m = *p;
        if (m->hdr != g->hdr)
            continue;
        if (--m->users == 0) {
            *p = m->next;
            munmap(m->hdr, m->total);
            free(m);
        }
        break;
    }
    pthread_mutex_unlock(&mappings_lock);
    pthread_mutex_destroy(&g->timing_lock);
    g->host->free(g->host->ctx, g);
}

/* Join: under the lock, wait for all ranks. 0, or -1 with `why`. */
static int join(ref_ep_group *g, char *why, size_t cap)
{
    ref_ep_hdr *s = g->hdr;
    lock(s);
    if (s->broken) {
        snprintf(why, cap, "%s", s->broken_why);
    } else if (s->joined[g->rank]) {
        snprintf(why, cap,
                 "EP group: rank %u joined this group already (each rank joins once; a unique id serves "
                 "one group)",
                 g->rank);
    }
    if (why[0]) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    s->joined[g->rank] = 1;
    s->members++;
    /* The last to join: every rank has the segment open, its name can go
     * (the mappings live on, and nothing is left behind in /dev/shm). */
    if (++s->n_joined == s->size)
        shm_unlink(g->name);
    pthread_cond_broadcast(&s->cond);
    struct timespec deadline;
    deadline_after(&deadline, g->timeout_ms);
    int timed_out = 0;
    while (s->n_joined < s->size && !s->broken && !timed_out)
        timed_out = timedwait(s, &deadline) == ETIMEDOUT;
    if (s->n_joined == s->size && !s->broken) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    /* The first rank to give up names who was missing then; every other
     * rank of this rendezvous reports the same (and a later one is refused). */
    if (!s->broken) {
        char missing[256];
        list_missing(s->joined, s->size, missing, sizeof missing);
        snprintf(s->broken_why, sizeof s->broken_why,
                 "EP group: rank %u waited %ld ms (option ep_timeout_ms) and rank(s) %s of %u never joined", g->rank,
                 g->timeout_ms, missing, s->size);
        s->broken = 1;
        pthread_cond_broadcast(&s->cond);
    }
    snprintf(why, cap, "%s", s->broken_why);
    int last = --s->members == 0;
    pthread_mutex_unlock(&s->lock);
    if (last)
        shm_unlink(g->name);
    return -1;
}

fmoe_status ref_ep_group_create(fmoe_ep_group_args *a)
{
    const ref_state *st = a->state;
    const fmoe_host *h = st->host;
    if (a->device_kind != FMOE_DEVICE_CPU)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "EP groups run on the host CPU only");
    if (a->size > REF_EP_MAX_RANKS)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "size %u: the reference double takes up to %d ranks",
                            a->size, REF_EP_MAX_RANKS);
    ref_ep_layout lay;
    layout(a, &lay);
    if (lay.rows > UINT32_MAX)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED,
                            "size %u x max_tokens_per_rank %u x top_k %u rows exceed what one apply takes (%u)",
                            a->size, a->max_tokens_per_rank, a->top_k, UINT32_MAX);
    ref_ep_group *g = h->alloc(h->ctx, sizeof *g, 0);
    if (!g)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(g, 0, sizeof *g);
    fmoe_status rc = segment_name(a, h, g->name, sizeof g->name);
    if (rc != FMOE_STATUS_OK) {
        h->free(h->ctx, g);
        return rc;
    }
    g->lay = lay;
    g->rank = a->rank;
    g->size = a->size;
    g->max_tokens = a->max_tokens_per_rank;
    g->hidden = a->hidden_size;
    g->top_k = a->top_k;
    g->num_experts = a->num_experts;
    g->act_dtype = a->act_dtype;
    g->dispatch = a->dispatch;
    g->mode = a->mode;
    g->timeout_ms = st->ep_timeout_ms;
    g->host = h;
    g->timing = a->timing != 0;
    pthread_mutex_init(&g->timing_lock, NULL);
    char why[600] = "";
    if (acquire(g->name, a, &lay, g->timeout_ms, &g->hdr, why, sizeof why) != 0) {
        pthread_mutex_destroy(&g->timing_lock);
        h->free(h->ctx, g);
        return h->error_set(a->err, strstr(why, "waited") ? FMOE_STATUS_DEVICE_ERROR : FMOE_STATUS_INVALID_ARGUMENT,
                            "%s", why);
    }
    if (join(g, why, sizeof why) != 0) {
        release(g);
        return h->error_set(a->err,
                            strstr(why, "joined this group already") ? FMOE_STATUS_INVALID_ARGUMENT
                                                                     : FMOE_STATUS_DEVICE_ERROR,
                            "%s", why);
    }
    a->group = g;
    a->expert_capacity = lay.rows;
    return FMOE_STATUS_OK;
}

void ref_ep_group_destroy(fmoe_ep_group_destroy_args *a)
{
    ref_ep_group *g = a->group;
    if (!g)
        return;
    lock(g->hdr);
    g->hdr->members--;
    pthread_mutex_unlock(&g->hdr->lock);
    release(g);
}

ref_ep_slot *ref_ep_slot_of(ref_ep_group *g, uint32_t rank)
{
    return &g->hdr->slots[rank];
}

char *ref_ep_region(ref_ep_group *g, uint32_t rank)
{
    return (char *)g->hdr + g->lay.header + (size_t)rank * g->lay.region;
}

int ref_ep_barrier(ref_ep_group *g, const char *what, char *why, size_t cap)
{
    ref_ep_hdr *s = g->hdr;
    lock(s);
    if (s->broken) {
        snprintf(why, cap, "%s", s->broken_why);
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    uint64_t gen = s->generation;
    s->arrived[g->rank] = 1;
    if (++s->n_arrived == s->size) {
        s->n_arrived = 0;
        memset(s->arrived, 0, s->size);
        s->generation++;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    struct timespec deadline;
    deadline_after(&deadline, g->timeout_ms);
    while (s->generation == gen && !s->broken)
        if (timedwait(s, &deadline) == ETIMEDOUT)
            break;
    int rc = 0;
    if (s->generation == gen) {
        if (!s->broken) {
            char missing[256];
            list_missing(s->arrived, s->size, missing, sizeof missing);
            snprintf(s->broken_why, sizeof s->broken_why,
                     "EP forward: rank %u waited %ld ms (option ep_timeout_ms) at %s and rank(s) %s of %u never "
                     "arrived; the group is broken (destroy and recreate it)",
                     g->rank, g->timeout_ms, what, missing, s->size);
            s->broken = 1;
            pthread_cond_broadcast(&s->cond);
        }
        snprintf(why, cap, "%s", s->broken_why);
        rc = -1;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void ref_ep_add_timing(ref_ep_group *g, double dispatch_s, double experts_s, double combine_s)
{
    pthread_mutex_lock(&g->timing_lock);
    g->forwards++;
    g->dispatch_s += dispatch_s;
    g->experts_s += experts_s;
    g->combine_s += combine_s;
    pthread_mutex_unlock(&g->timing_lock);
}

fmoe_status ref_ep_timing(fmoe_ep_timing_args *a)
{
    ref_ep_group *g = a->group;
    if (!g->timing)
        return g->host->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "the group was created without timing");
    pthread_mutex_lock(&g->timing_lock);
    a->forwards = g->forwards;
    a->dispatch_seconds = g->dispatch_s;
    a->experts_seconds = g->experts_s;
    a->combine_seconds = g->combine_s;
    if (a->reset) {
        g->forwards = 0;
        g->dispatch_s = g->experts_s = g->combine_s = 0;
    }
    pthread_mutex_unlock(&g->timing_lock);
    return FMOE_STATUS_OK;
}

const fmoe_ep_ops ref_ep_ops = {
    .struct_size = sizeof(fmoe_ep_ops),
    .unique_id = ref_ep_unique_id,
    .group_create = ref_ep_group_create,
    .group_destroy = ref_ep_group_destroy,
    .forward = ref_ep_forward,
    .timing = ref_ep_timing,
};
