/*
 * plugins/cuda/ep_nccl.cu - NCCL loaded at run time (ep_nccl.h says why).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/ep_nccl.h"

namespace {

/* One table per library path, kept for the process (as the library is). */
constexpr int MAX_LIBS = 4;
struct loaded {
    char path[512];
    fmcu_nccl table;
};
loaded libs[MAX_LIBS];
int n_libs = 0;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

template <typename F> bool sym(void *h, const char *name, F *out, char *why, size_t cap, const char *path)
{
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(why, cap, "%s has no %s (NCCL 2.28 or later is needed for EP groups)", path, name);
        return false;
    }
    *out = reinterpret_cast<F>(p);
    return true;
}

bool fill(void *h, fmcu_nccl *t, char *why, size_t cap, const char *path)
{
    return sym(h, "ncclGetVersion", &t->GetVersion, why, cap, path) &&
           sym(h, "ncclGetUniqueId", &t->GetUniqueId, why, cap, path) &&
           sym(h, "ncclCommInitRankConfig", &t->CommInitRankConfig, why, cap, path) &&
           sym(h, "ncclCommGetAsyncError", &t->CommGetAsyncError, why, cap, path) &&
           sym(h, "ncclCommDestroy", &t->CommDestroy, why, cap, path) &&
           sym(h, "ncclCommAbort", &t->CommAbort, why, cap, path) &&
           sym(h, "ncclCommCount", &t->CommCount, why, cap, path) &&
           sym(h, "ncclCommUserRank", &t->CommUserRank, why, cap, path) &&
           sym(h, "ncclCommCuDevice", &t->CommCuDevice, why, cap, path) &&
           sym(h, "ncclMemAlloc", &t->MemAlloc, why, cap, path) && sym(h, "ncclMemFree", &t->MemFree, why, cap, path) &&
           sym(h, "ncclCommWindowRegister", &t->CommWindowRegister, why, cap, path) &&
           sym(h, "ncclCommWindowDeregister", &t->CommWindowDeregister, why, cap, path) &&
           sym(h, "ncclTeamLsa", &t->TeamLsa, why, cap, path) &&
           sym(h, "ncclAllGather", &t->AllGather, why, cap, path) &&
           sym(h, "ncclCommSplit", &t->CommSplit, why, cap, path) && sym(h, "ncclSend", &t->Send, why, cap, path) &&
           sym(h, "ncclRecv", &t->Recv, why, cap, path) && sym(h, "ncclGroupStart", &t->GroupStart, why, cap, path) &&
           sym(h, "ncclGroupEnd", &t->GroupEnd, why, cap, path) &&
           sym(h, "ncclGetErrorString", &t->GetErrorString, why, cap, path);
}

} // namespace

extern "C" const fmcu_nccl *fmcu_nccl_load(const char *path, char *why, size_t cap)
{
    if (!path || !path[0] || strlen(path) >= sizeof libs[0].path) {
        snprintf(why, cap, "option nccl_library: empty or too long");
        return nullptr;
    }
    pthread_mutex_lock(&lock);
    const fmcu_nccl *found = nullptr;
    for (int i = 0; i < n_libs && !found; i++)
        if (strcmp(libs[i].path, path) == 0)
            found = &libs[i].table;
    if (found) {
        pthread_mutex_unlock(&lock);
        return found;
    }
    if (n_libs == MAX_LIBS) {
        pthread_mutex_unlock(&lock);
        snprintf(why, cap, "more than %d different nccl_library paths in one process", MAX_LIBS);
        return nullptr;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        pthread_mutex_unlock(&lock);
        snprintf(why, cap, "NCCL (option nccl_library = \"%s\") could not be loaded: %s", path, e ? e : "dlopen failed");
        return nullptr;
    }
    fmcu_nccl t;
    memset(&t, 0, sizeof t);
    if (!fill(h, &t, why, cap, path)) {
        pthread_mutex_unlock(&lock);
        return nullptr;
    }
    if (t.GetVersion(&t.version) != ncclSuccess || t.version < FMCU_NCCL_MIN_VERSION) {
        pthread_mutex_unlock(&lock);
        snprintf(why, cap, "%s is NCCL %d; EP groups need %d or later (symmetric windows)", path, t.version,
                 FMCU_NCCL_MIN_VERSION);
        return nullptr;
    }
    snprintf(libs[n_libs].path, sizeof libs[0].path, "%s", path);
    libs[n_libs].table = t;
    found = &libs[n_libs++].table;
    pthread_mutex_unlock(&lock);
    return found;
}
