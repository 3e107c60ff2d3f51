/* CPU feature detection and the choice of inner-kernel table. */
#include "cpu_isa.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
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
    /* GFNI: CPUID leaf 7, sub-leaf 0, ECX bit 8. */
    unsigned a70, b70, c70, d70;
    out->gfni = __get_cpuid_count(7, 0, &a70, &b70, &c70, &d70) && (c70 & (1u << 8));
    /* AVX-VNNI: CPUID leaf 7, sub-leaf 1, EAX bit 4 (it uses the AVX
     * state the avx check above already covers). */
    unsigned a7, b7, c7, d7;
    out->avxvnni = out->avx && __get_cpuid_count(7, 1, &a7, &b7, &c7, &d7) && (a7 & (1u << 4));
#if defined(__clang__)
    /* clang's __builtin_cpu_supports does not know "f16c": CPUID leaf 1,
     * ECX bit 29. */
    unsigned eax, ebx, ecx, edx;
    out->f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
#else
    out->f16c = __builtin_cpu_supports("f16c");
#endif
#endif
#if defined(__aarch64__)
    out->neon = true;
#if defined(__linux__)
    /* HWCAP_ASIMDDP: bit 20 of AT_HWCAP. */
    out->dotprod = (getauxval(AT_HWCAP) & (1ul << 20)) != 0;
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
        {offsetof(cpu_isa_features, gfni), "gfni"},
        {offsetof(cpu_isa_features, avxvnni), "avxvnni"},
        {offsetof(cpu_isa_features, neon), "neon"},
        {offsetof(cpu_isa_features, dotprod), "dotprod"},
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

static bool cpu_isa_can_run_avxvnni(const cpu_isa_features *f)
{
    return cpu_isa_can_run_avx2(f) && f->avxvnni && cpu_isa_avxvnni_table() != NULL;
}

static bool cpu_isa_can_run_avx512(const cpu_isa_features *f)
{
    return cpu_isa_can_run_avx2(f) && f->avx512f && f->avx512bw && f->avx512vl &&
           f->avx512vnni && cpu_isa_avx512_table() != NULL;
}

static bool cpu_isa_can_run_avx512gfni(const cpu_isa_features *f)
{
    return cpu_isa_can_run_avx512(f) && f->gfni && cpu_isa_avx512gfni_table() != NULL;
}

static bool cpu_isa_can_run_neon(const cpu_isa_features *f)
{
    return f->neon && cpu_isa_neon_table() != NULL;
}

static bool cpu_isa_can_run_dotprod(const cpu_isa_features *f)
{
    return cpu_isa_can_run_neon(f) && f->dotprod && cpu_isa_dotprod_table() != NULL;
}

sy_status cpu_isa_select(const cpu_isa_features *f, const char *request,
                         const cpu_isa_table **out_table)
{
    static const struct {
        const char *name;
        bool (*can_run)(const cpu_isa_features *f);
        const cpu_isa_table *(*table)(void);
    } levels[] = {
        /* Best first: auto takes the first one the CPU runs. */
        {"avx512gfni", cpu_isa_can_run_avx512gfni, cpu_isa_avx512gfni_table},
        {"avx512", cpu_isa_can_run_avx512, cpu_isa_avx512_table},
        {"avxvnni", cpu_isa_can_run_avxvnni, cpu_isa_avxvnni_table},
        {"avx2", cpu_isa_can_run_avx2, cpu_isa_avx2_table},
        {"dotprod", cpu_isa_can_run_dotprod, cpu_isa_dotprod_table},
        {"neon", cpu_isa_can_run_neon, cpu_isa_neon_table},
    };
    const size_t n_levels = sizeof levels / sizeof levels[0];
    *out_table = cpu_isa_scalar_table();
    if (!request || !*request || strcmp(request, "auto") == 0) {
        for (size_t i = 0; i < n_levels; i++) {
            if (levels[i].can_run(f)) {
                *out_table = levels[i].table();
                break;
            }
        }
        return SY_OK;
    }
    if (strcmp(request, "scalar") == 0)
        return SY_OK;
    for (size_t i = 0; i < n_levels; i++) {
        if (strcmp(request, levels[i].name) != 0)
            continue;
        if (!levels[i].can_run(f))
            return SY_E_UNSUPPORTED;
        *out_table = levels[i].table();
        return SY_OK;
    }
    return SY_E_INVALID_ARG;
}
