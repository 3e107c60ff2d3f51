/* UTF-8 decoding, character classes and the GPT-2 byte mapping. */
#include "unicode.h"

size_t sy__utf8_decode(const uint8_t *s, size_t len, uint32_t *out_cp)
{
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *out_cp = b0;
        return 1;
    }
    size_t n;
    uint32_t cp, min;
    if ((b0 & 0xe0) == 0xc0) {
        n = 2, cp = b0 & 0x1fu, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
        n = 3, cp = b0 & 0x0fu, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
        n = 4, cp = b0 & 0x07u, min = 0x10000;
    } else {
        goto out_invalid;
    }
    if (n > len)
        goto out_invalid;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            goto out_invalid;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        goto out_invalid;
    *out_cp = cp;
    return n;
out_invalid:
    *out_cp = SY_UNICODE_INVALID;
    return 1;
}

size_t sy__utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp <= 0x10ffff) {
        out[0] = (uint8_t)(0xf0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (uint8_t)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}

uint32_t sy__unicode_flags(uint32_t cp)
{
    if (cp < 128)
        return sy__unicode_ascii_flags[cp];
    uint32_t lo = 0, hi = sy__unicode_range_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const sy__unicode_range *r = &sy__unicode_ranges[mid];
        if (cp < r->lo)
            hi = mid;
        else if (cp > r->hi)
            lo = mid + 1;
        else
            return r->flags;
    }
    return 0;
}

/* Bytes that GPT-2 keeps as themselves: '!'..'~', U+00A1..U+00AC and
 * U+00AE..U+00FF.  The rest are numbered from U+0100 in byte order. */
static int gpt2_byte_is_printable(uint32_t b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t sy__gpt2_byte_to_cp(uint8_t b)
{
    if (gpt2_byte_is_printable(b))
        return b;
    /* Count the non-printable bytes below |b|: 0x00..0x20 (33), 0x7f..0xa0
     * (34), 0xad (1). */
    uint32_t k;
    if (b <= 0x20)
        k = b;
    else if (b <= 0xa0)
        k = 33u + (b - 0x7fu);
    else
        k = 67; /* 0xad */
    return 0x100u + k;
}

int sy__gpt2_cp_to_byte(uint32_t cp)
{
    if (cp <= 0xff)
        return gpt2_byte_is_printable(cp) ? (int)cp : -1;
    if (cp < 0x100 || cp > 0x100 + 67)
        return -1;
    uint32_t k = cp - 0x100;
    if (k <= 32)
        return (int)k;
    if (k <= 66)
        return (int)(0x7f + (k - 33));
    return 0xad;
}
