/* The CPU plugin opened as a module, directly (dlopen, no runtime): a
 * host that logs into a buffer and the module's query entry. */
#ifndef SY_TEST_CPU_DIRECT_H
#define SY_TEST_CPU_DIRECT_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_case.h"
#include "direct_host.h"

static inline void *open_module(void)
{
    const char *dir = getenv("SWITCHYARD_PLUGIN_PATH");
    cr_assert_not_null(dir, "SWITCHYARD_PLUGIN_PATH is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/sy-cpu.so", dir);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(so, "dlopen %s: %s", path, dlerror());
    return so;
}

static inline const sy_plugin_desc *query_module(void *so, uint32_t abi)
{
    sy_plugin_query_fn q;
    void *sym = dlsym(so, SY_PLUGIN_ENTRY_SYMBOL);
    cr_assert_not_null(sym, "no %s", SY_PLUGIN_ENTRY_SYMBOL);
    memcpy(&q, &sym, sizeof q);
    return q(abi);
}

#endif
