/* CPU feature detection and the choice of inner-kernel table. */
#include "cpu_isa.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

void cpu_isa_detect(cpu_isa_features *out)
{
    memset(out, 0, sizeof *out);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    out->sse42 = __builtin_cpu_supports("sse4.2");
    out->avx = __builtin_cpu_supports("avx");
    out->avx2 = __builtin_cpu_supports("avx2");
    out->fma = __builtin_cpu_supports("fma");
    out->avx512f = __builtin_cpu_supports("avx512f");
    out->avx512bw = __builtin_cpu_supports("avx512bw");
    out->avx512vl = __builtin_cpu_supports("avx512vl");
    out->avx512vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__clang__)
    /* clang's __builtin_cpu_supports does not know "f16c": CPUID leaf 1,
     * ECX bit 29. */
    unsigned eax, ebx, ecx, edx;
    out->f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
#else
    out->f16c = __builtin_cpu_supports("f16c");
#endif
#endif
}

void cpu_isa_format(const cpu_isa_features *f, char *out_text, size_t size)
{
    static const struct {
        size_t offset;
        const char *name;
    } names[] = {
        {offsetof(cpu_isa_features, sse42), "sse4.2"},
        {offsetof(cpu_isa_features, avx), "avx"},
        {offsetof(cpu_isa_features, avx2), "avx2"},
        {offsetof(cpu_isa_features, fma), "fma"},
        {offsetof(cpu_isa_features, f16c), "f16c"},
        {offsetof(cpu_isa_features, avx512f), "avx512f"},
        {offsetof(cpu_isa_features, avx512bw), "avx512bw"},
        {offsetof(cpu_isa_features, avx512vl), "avx512vl"},
        {offsetof(cpu_isa_features, avx512vnni), "avx512vnni"},
    };
    if (size == 0)
        return;
    out_text[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const bool *flag = (const bool *)((const char *)f + names[i].offset);
        if (!*flag)
            continue;
        int n = snprintf(out_text + used, size - used, "%s%s", used ? " " : "", names[i].name);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    if (used == 0)
        snprintf(out_text, size, "none");
}

static bool cpu_isa_can_run_avx2(const cpu_isa_features *f)
{
    return f->avx2 && f->fma && f->f16c && cpu_isa_avx2_table() != NULL;
}

sy_status cpu_isa_select(const cpu_isa_features *f, const char *request,
                         const cpu_isa_table **out_table)
{
    *out_table = cpu_isa_scalar_table();
    if (!request || !*request || strcmp(request, "auto") == 0) {
        if (cpu_isa_can_run_avx2(f))
            *out_table = cpu_isa_avx2_table();
        return SY_OK;
    }
    if (strcmp(request, "scalar") == 0)
        return SY_OK;
    if (strcmp(request, "avx2") == 0) {
        if (!cpu_isa_can_run_avx2(f))
            return SY_E_UNSUPPORTED;
        *out_table = cpu_isa_avx2_table();
        return SY_OK;
    }
    return SY_E_INVALID_ARG;
}
